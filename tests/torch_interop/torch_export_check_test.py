"""Every plan the catalogue makes, over a grid of P, V and M, exported in both of torch's CSV
formats and put through torch's own checks: `_validate_schedule` (counts and order per stage),
`_add_send_recv` (lowering a compute-only file, as `_load_csv` does) and
`_simulate_comms_compute` (a dry run that fails on a deadlock). Each export passes them, or
refuses with exit 1 (dualpipe: two model copies, which torch's grammar cannot express).
F&B overlap cells are expanded into their F and B for the simulator, which cannot take them
even for torch's own DualPipeV.
Then pipeplan's own model of that lowering (`simulate --runtime torch --export torch-csv`, whose
timeline carries the lists it timed) is held to torch's `_add_send_recv`, action for action.
"""

import json
import os
import sys
import tempfile
import unittest

import interop_support as support

# strategy -> (stages per rank, placement, the M values to try).
GRID = {
    "gpipe": (1, "loop"), "1f1b": (1, "loop"), "interleaved-1f1b": (2, "loop"),
    "looped-bfs": (2, "loop"), "1f1b-overlap": (1, "loop"),
    "interleaved-1f1b-overlap": (2, "loop"), "zb-h1": (1, "loop"), "zb-h2": (1, "loop"),
    "zb": (1, "loop"), "interleaved-zb": (2, "loop"), "zbv": (2, "v"),
    "zbv-handcrafted": (2, "v"), "v-half": (2, "v"), "v-min": (2, "v"),
    "dualpipe-v": (2, "v"), "dualpipe": (2, "dual"),
}
RANKS = (2, 4)
MICROBATCHES = (8, 12)
REFUSED = {"dualpipe"}


def stage_to_rank(placement, ranks):
    if placement == "loop":
        return lambda stage: stage % ranks
    # V: rank r holds stages r and 2P-1-r.
    return lambda stage: stage if stage < ranks else 2 * ranks - 1 - stage


def parse_rows(csv_text):
    from torch.distributed.pipelining.schedules import _Action
    return {rank: [_Action.from_str(cell) for cell in row]
            for rank, row in enumerate(support.csv_rows(csv_text))}


def expand_overlap(actions):
    """Overlap cells as their sub-actions, in order; REDUCE_GRAD dropped (no dependency)."""
    from torch.distributed.pipelining.schedules import OVERLAP_F_B, REDUCE_GRAD
    out = {}
    for rank, row in actions.items():
        flat = []
        for action in row:
            if action.computation_type == OVERLAP_F_B and action.sub_actions:
                flat.extend(action.sub_actions)
            elif action.computation_type != REDUCE_GRAD:
                flat.append(action)
        out[rank] = flat
    return out


KIND_TOKENS = {"FORWARD": "F", "BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W",
               "SEND_F": "SEND_F", "RECV_F": "RECV_F", "SEND_B": "SEND_B", "RECV_B": "RECV_B"}


def flat_tokens(actions):
    """(stage, kind, microbatch) per action, overlap cells as their halves."""
    out = []
    for action in actions:
        if action["kind"] == "OVERLAP_F_B":
            out.extend(flat_tokens(action["sub_actions"]))
        else:
            out.append((action.get("stage", 0), KIND_TOKENS[action["kind"]],
                        action.get("microbatch", 0)))
    return out


def pipeplan_lowering(strategy, ranks, stages_per_rank, microbatches):
    """The lists pipeplan's model of torch's runtime runs for the torch-csv export."""
    plan, _ = support.run_pipeplan(
        *support.plan_args(strategy, ranks, stages_per_rank, microbatches), "-o", "-")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "torch.json")
        support.run_pipeplan("simulate", "-", "--runtime", "torch", "--export", "torch-csv",
                             "--timeline", path, stdin=plan)
        with open(path, encoding="utf-8") as f:
            programs = json.load(f)["plan"]["programs"]
    return {p.get("rank", 0): flat_tokens(p["actions"]) for p in programs}


class TorchExportCheckTest(unittest.TestCase):

    def test_pipeplans_model_of_torchs_lowering_is_torchs(self):
        from torch.distributed.pipelining import schedules
        compared = 0
        for strategy, (stages_per_rank, placement) in GRID.items():
            if strategy in REFUSED:
                continue
            for ranks in RANKS:
                microbatches = MICROBATCHES[0]
                with self.subTest(f"{strategy} P={ranks}"):
                    csv_text, _ = support.plan_and_export(
                        "torch-csv", strategy, ranks, stages_per_rank, microbatches)
                    compute = {rank: [a for a in row if a.is_compute_op]
                               for rank, row in parse_rows(csv_text).items()}
                    lowered = schedules._add_send_recv(
                        compute, stage_to_rank(placement, ranks), ranks * stages_per_rank)
                    want = {rank: [(a.stage_index, a.computation_type.value,
                                    a.microbatch_index) for a in expand_overlap({0: row})[0]]
                            for rank, row in lowered.items()}
                    got = pipeplan_lowering(strategy, ranks, stages_per_rank, microbatches)
                    self.assertEqual(got, want)
                    compared += 1
        print(f"{compared} lowerings equal torch's")
        self.assertGreater(compared, 20)

    def test_every_export_passes_torchs_checks_or_refuses(self):
        from torch.distributed.pipelining import schedules
        checked = refused = 0
        for strategy, (stages_per_rank, placement) in GRID.items():
            for ranks in RANKS:
                for microbatches in MICROBATCHES:
                    num_stages = ranks * stages_per_rank
                    to_rank = stage_to_rank(placement, ranks)
                    # A plan for torch's runtime posts its receives when their data is sent.
                    for csv_format, extra in (("torch-csv", ()), ("torch-csv-comms", ()),
                                              ("torch-csv-comms", ("--runtime", "torch"))):
                        name = f"{strategy} P={ranks} M={microbatches} {csv_format} {extra}"
                        with self.subTest(name):
                            if extra and strategy in REFUSED:
                                continue  # --runtime torch refuses to plan it at all
                            code, csv_text, stderr = support.try_plan_and_export(
                                csv_format, strategy, ranks, stages_per_rank, microbatches,
                                *extra)
                            if strategy in REFUSED:
                                self.assertEqual(code, 1, stderr)
                                self.assertIn("dualpipe-v", stderr)
                                refused += 1
                                continue
                            self.assertEqual(code, 0, stderr)
                            actions = parse_rows(csv_text)
                            compute = {rank: [a for a in row if a.is_compute_op]
                                       for rank, row in actions.items()}
                            schedules._validate_schedule(compute, ranks, num_stages,
                                                         microbatches)
                            if csv_format == "torch-csv":
                                actions = schedules._add_send_recv(
                                    expand_overlap(compute), to_rank, num_stages)
                            schedules._simulate_comms_compute(expand_overlap(actions), to_rank,
                                                              num_stages)
                            checked += 1
        print(f"{checked} exports passed torch's checks, {refused} refused")
        self.assertGreater(checked, 100)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
