"""pipeplan plans in torch's own runtime: every case's plan is exported in both torch CSV
formats, loaded by torch.distributed.pipelining's _PipelineScheduleRuntime._load_csv and run
for one training step in P processes over Gloo (127.0.0.1 only); the losses and every
gradient must equal a single-process reference step (stage_model.py).

    python torch_runtime_test.py --ranks P      (ctest runs it with P = 2 and P = 4)

One world of P processes runs every case in turn, so torch is imported P times, not once per
case. The same file is the worker (--worker).
"""

import argparse
import csv
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest

import interop_support as support

# (strategy, V, extra `pipeplan plan` flags). The post-validation case checks that what torch
# cannot express is left out with a note and the rest still trains correctly.
CASES = [
    ("1f1b", 1, ()),
    ("interleaved-1f1b", 2, ()),
    ("interleaved-zb", 2, ()),
    ("zbv", 2, ()),
    ("dualpipe-v", 2, ()),
    ("zb-2p", 1, ()),
    ("zbv", 2, ("--post-validation",)),
    # Planned for torch's runtime: receives posted when their data is sent, not at the consumer.
    ("interleaved-zb", 2, ("--runtime", "torch")),
    ("dualpipe-v", 2, ("--runtime", "torch")),
]
# pipeplan export format -> the format argument of torch's _load_csv.
FORMATS = {"torch-csv": "compute_only", "torch-csv-comms": "compute_comms"}

WORLD_TIMEOUT_S = 240  # the whole world, torch imports included (2 shared cores)
GLOO_TIMEOUT_S = 60  # a rank whose peer died fails after this instead of hanging
POLL_S = 0.2


def microbatches_for(ranks):
    # dualpipe-v needs M >= 2P; one M for every case keeps the reference shared.
    return 2 * ranks


def case_id(index, csv_format):
    return f"case{index}-{csv_format}"


def case_label(case, csv_format):
    strategy, stages_per_rank, extra = case
    return " ".join([strategy, f"V={stages_per_rank}", *extra, csv_format])


# --- worker -------------------------------------------------------------------------------


def stages_in_row(row):
    """The stages a CSV row acts on: the rank's own stages (as _load_csv infers them)."""
    from torch.distributed.pipelining.schedules import _Action
    stages = set()
    for cell in row:
        action = _Action.from_str(cell)
        if action is None:
            continue
        for leaf in action.sub_actions or (action,):
            stages.add(leaf.stage_index)
    return sorted(stages)


def gloo_pipeline_stage_class():
    from torch.distributed.pipelining import PipelineStage

    class GlooPipelineStage(PipelineStage):
        """Works around a torch bug (2.11): a stage whose neighbour sits on its own rank (the
        turn of a V placement) posts its warm-up send and receive to that rank, and Gloo has
        no connection to itself, so torch's own ScheduleZBVZeroBubble fails on Gloo too. The
        warm-up only opens connections; the schedule's own hand-off between local stages
        never sends, so dropping the self-addressed ops changes nothing else."""

        def _get_init_p2p_neighbors_ops(self):
            return [op for op in super()._get_init_p2p_neighbors_ops()
                    if op.group_peer != self.group_rank]

    return GlooPipelineStage


def run_case(entry, rank, out_dir):
    import torch
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    import stage_model

    with open(entry["csv"], newline="") as f:
        rows = list(csv.reader(f))
    num_stages = entry["num_stages"]
    microbatches = entry["microbatches"]
    own = stages_in_row(rows[rank])
    # Shapes are given, so no shape-inference round trips: every stage maps (rows, WIDTH)
    # to (rows, WIDTH).
    meta = torch.empty(stage_model.ROWS_PER_MICROBATCH, stage_model.WIDTH,
                       dtype=stage_model.DTYPE, device="meta")
    modules = {stage: stage_model.stage_module(stage) for stage in own}
    stage_class = gloo_pipeline_stage_class()
    stages = [stage_class(modules[stage], stage, num_stages, torch.device("cpu"),
                           input_args=meta, output_args=meta) for stage in own]
    schedule = _PipelineScheduleRuntime(stages, microbatches, loss_fn=stage_model.loss_fn)
    schedule._load_csv(entry["csv"], format=entry["torch_format"])

    inputs, targets = stage_model.batch(microbatches)
    args = (inputs,) if 0 in own else ()
    losses = []
    if num_stages - 1 in own:
        schedule.step(*args, target=targets, losses=losses)
    else:
        schedule.step(*args)
    grads = {stage_model.parameter_name(stage, name): parameter.grad
             for stage, module in modules.items()
             for name, parameter in module.named_parameters()}
    torch.save({"losses": [loss.detach() for loss in losses], "grads": grads},
               os.path.join(out_dir, f"{entry['id']}.rank{rank}.pt"))


def worker_main(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    with open(args.manifest) as f:
        manifest = json.load(f)
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S))
    try:
        for entry in manifest:
            print(f"rank {args.rank}: {entry['label']}", flush=True)
            run_case(entry, args.rank, args.out)
            dist.barrier()  # every rank done with this case before the next one's messages
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip the process group's teardown, which would wait for the peers
    dist.destroy_process_group()
    return 0


# --- driver -------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_world(ranks, manifest_path, out_dir):
    """Runs the P workers to completion; returns None or a message naming what failed."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               GLOO_SOCKET_IFNAME="lo")
    workers = []
    for rank in range(ranks):
        log = open(os.path.join(out_dir, f"rank{rank}.log"), "w")
        command = [sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(rank),
                   "--world", str(ranks), "--manifest", manifest_path, "--out", out_dir]
        workers.append((subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env),
                        log))
    deadline = time.monotonic() + WORLD_TIMEOUT_S
    failure = None
    while failure is None and any(p.poll() is None for p, _ in workers):
        failed = [rank for rank, (p, _) in enumerate(workers) if p.poll() not in (None, 0)]
        if failed:
            failure = f"rank(s) {failed} failed"
        elif time.monotonic() > deadline:
            failure = f"the world did not finish within {WORLD_TIMEOUT_S} s"
        else:
            time.sleep(POLL_S)
    for p, log in workers:
        if p.poll() is None:
            p.kill()  # only our own workers, after a failure or the deadline
        p.wait()
        log.close()
    if failure is None and any(p.returncode != 0 for p, _ in workers):
        failure = f"exit codes {[p.returncode for p, _ in workers]}"
    if failure is None:
        return None
    logs = []
    for rank in range(ranks):
        with open(os.path.join(out_dir, f"rank{rank}.log")) as f:
            logs.append(f"--- rank {rank} ---\n{f.read()[-4000:]}")
    return failure + "\n" + "\n".join(logs)


class TorchRuntimeTest(unittest.TestCase):
    ranks = 2

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-torch-runtime-")
        cls.microbatches = microbatches_for(cls.ranks)
        cls.manifest = []
        cls.export_notes = {}
        for index, case in enumerate(CASES):
            strategy, stages_per_rank, extra = case
            for csv_format, torch_format in FORMATS.items():
                text, stderr = support.plan_and_export(csv_format, strategy, cls.ranks,
                                                       stages_per_rank, cls.microbatches, *extra)
                entry_id = case_id(index, csv_format)
                path = os.path.join(cls.tmp.name, f"{entry_id}.csv")
                with open(path, "w", newline="") as f:
                    f.write(text)
                cls.export_notes[entry_id] = support.notes(stderr)
                cls.manifest.append({"id": entry_id, "label": case_label(case, csv_format),
                                     "csv": path, "torch_format": torch_format,
                                     "num_stages": cls.ranks * stages_per_rank,
                                     "microbatches": cls.microbatches})
        manifest_path = os.path.join(cls.tmp.name, "manifest.json")
        with open(manifest_path, "w") as f:
            json.dump(cls.manifest, f)
        started = time.monotonic()
        cls.world_failure = launch_world(cls.ranks, manifest_path, cls.tmp.name)
        print(f"P={cls.ranks}: {len(cls.manifest)} runs in torch's runtime took "
              f"{time.monotonic() - started:.1f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def gathered(self, entry_id):
        import torch
        losses, grads = [], {}
        for rank in range(self.ranks):
            result = torch.load(os.path.join(self.tmp.name, f"{entry_id}.rank{rank}.pt"))
            losses += result["losses"]
            grads.update(result["grads"])
        return losses, grads

    def test_losses_and_gradients_equal_the_reference(self):
        import torch
        import stage_model
        self.assertIsNone(self.world_failure)
        references = {}
        for entry in self.manifest:
            with self.subTest(entry["label"]):
                num_stages = entry["num_stages"]
                if num_stages not in references:
                    references[num_stages] = stage_model.reference_step(num_stages,
                                                                         self.microbatches)
                expected_losses, expected_grads = references[num_stages]
                losses, grads = self.gathered(entry["id"])
                self.assertEqual(len(losses), self.microbatches)
                torch.testing.assert_close(torch.stack(losses), torch.stack(expected_losses),
                                           rtol=1e-12, atol=1e-14)
                self.assertEqual(sorted(grads), sorted(expected_grads))
                for name, grad in grads.items():
                    self.assertIsNotNone(grad, name)
                    torch.testing.assert_close(grad, expected_grads[name], rtol=1e-10,
                                               atol=1e-12, msg=lambda m, n=name: f"{n}: {m}")

    def test_what_torch_cannot_express_is_left_out_with_a_note(self):
        for index, (_, _, extra) in enumerate(CASES):
            for csv_format in FORMATS:
                entry_id = case_id(index, csv_format)
                with self.subTest(entry_id):
                    left_out = self.export_notes[entry_id]
                    if "--post-validation" not in extra:
                        self.assertEqual(left_out, [])
                        continue
                    self.assertTrue(any("post-validation actions left out" in n
                                        for n in left_out), left_out)
                    if csv_format == "torch-csv-comms":
                        self.assertTrue(any("rollback flags left out" in n for n in left_out),
                                        left_out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--rank", type=int)
    parser.add_argument("--world", type=int)
    parser.add_argument("--manifest")
    parser.add_argument("--out")
    args, unittest_args = parser.parse_known_args()
    support.require_torch()
    if args.worker:
        return worker_main(args)
    TorchRuntimeTest.ranks = args.ranks
    program = unittest.main(module=__name__, argv=[sys.argv[0], "-v", *unittest_args],
                            exit=False)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
