"""Profile your own model: a plain nn.Module trained with torch.distributed.pipelining under
torch.profiler, its traces imported into pipeplan, calibrated, re-planned and diffed.

    python examples/profile_torch_job.py --pipeplan build/cli/pipeplan [--ranks 2] [--out DIR]

What it does, as a user's job would:
  1. `pipeplan plan --strategy zbv` for P ranks x 2 stages and M = 2P microbatches, exported
     as torch's CSV.
  2. P local processes (Gloo) train a small GPT-style decoder (embedding, pre-norm causal
     self-attention + MLP blocks, LM head) cut into 2P PipelineStages placed in a V, twice:
     with that plan (_PipelineScheduleRuntime._load_csv) and with torch's own
     ScheduleZBVZeroBubble. AdamW steps after every step. python/pipeplan_profiler.py profiles
     the steps after a warm-up one and writes one trace per rank.
  3. `pipeplan import --format torch-trace` reads each job's traces: with --plan for ours,
     without a plan for torch's (the plan is what it ran, torch's transfers included).
  4. `pipeplan profile` + `calibrate` turn the measured steps into a cost model of this model
     on this machine; `simulate` + `diff` put the simulated step next to the measured one;
     `pipeplan plan --strategy auto --costs` re-plans with the calibrated costs.
The model is an ordinary nn.Module: nothing of it is written for pipeplan.
"""

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import ScheduleZBVZeroBubble, _PipelineScheduleRuntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from pipeplan_profiler import profile_steps  # noqa: E402

VOCAB = 512
SEQUENCE = 32
HIDDEN = 128
HEADS = 4
ROWS = 4  # sequences per microbatch


class Block(torch.nn.Module):
    """A pre-norm decoder block: causal self-attention, then an MLP, each with a residual."""

    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(HIDDEN)
        self.qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = torch.nn.Linear(HIDDEN, HIDDEN)
        self.norm2 = torch.nn.LayerNorm(HIDDEN)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(),
                                       torch.nn.Linear(4 * HIDDEN, HIDDEN))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(HIDDEN, dim=-1)
        q, k, v = (y.view(b, t, HEADS, HIDDEN // HEADS).transpose(1, 2) for y in (q, k, v))
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, HIDDEN))
        return x + self.mlp(self.norm2(x))


class Stage(torch.nn.Module):
    """Stage `index` of `count`: the embedding before its block on the first, the head after
    it on the last."""

    def __init__(self, index, count):
        super().__init__()
        torch.manual_seed(100 + index)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN) if index == 0 else None
        self.block = Block()
        self.head = (torch.nn.Sequential(torch.nn.LayerNorm(HIDDEN),
                                         torch.nn.Linear(HIDDEN, VOCAB))
                     if index == count - 1 else None)

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        x = self.block(x)
        return self.head(x) if self.head is not None else x


class LocalTurnStage(PipelineStage):
    """Drops torch 2.11's warm-up send to a stage's own rank (the V's turn): Gloo has no
    connection to itself, and the schedule never sends between a rank's own stages."""

    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops()
                if op.group_peer != self.group_rank]


def loss_fn(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def stage_shapes(index, count):
    """The meta tensors PipelineStage needs: what stage `index` takes and gives."""
    hidden = torch.empty(ROWS, SEQUENCE, HIDDEN, device="meta")
    inputs = torch.empty(ROWS, SEQUENCE, dtype=torch.long, device="meta") if index == 0 else hidden
    outputs = torch.empty(ROWS, SEQUENCE, VOCAB, device="meta") if index == count - 1 else hidden
    return inputs, outputs


def saved_activation_bytes(index, count):
    """What stage `index`'s forward on one microbatch keeps for its backward, from the tensors
    autograd saved (the last stage's loss included, parameters and the stage's input not):
    the figure the profiled "F keeps" should match."""
    stage = Stage(index, count)
    if index == 0:
        x = torch.randint(0, VOCAB, (ROWS, SEQUENCE))
    else:
        x = torch.randn(ROWS, SEQUENCE, HIDDEN, requires_grad=True)
    storages = {}

    def pack(tensor):
        storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = stage(x)
        if index == count - 1:
            loss_fn(out, torch.randint(0, VOCAB, (ROWS, SEQUENCE)))
    left_out = {p.untyped_storage().data_ptr() for p in stage.parameters()}
    left_out.add(x.untyped_storage().data_ptr())
    kept = sum(size for pointer, size in storages.items() if pointer not in left_out)
    if out.untyped_storage().data_ptr() not in storages:  # held for the send and the backward
        kept += out.untyped_storage().nbytes()
    return kept


def compare_activations(profile_path, count):
    """Prints, per stage, the profiled bytes an F keeps next to saved_activation_bytes."""
    with open(profile_path) as f:
        stages = json.load(f)["stages"]
    for index in range(count):
        measured = float(stages[index]["memory"]["kept_by_forward"]["median"])
        expected = saved_activation_bytes(index, count)
        print(f"stage {index}: F keeps {measured:.0f} B measured, {expected} B saved for "
              f"backward ({(measured - expected) / expected:+.1%})", flush=True)


def train(rank, world, port, csv_path, out, steps):
    """One rank of both jobs: our plan from its CSV, then torch's ScheduleZBVZeroBubble."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    count = 2 * world
    microbatches = 2 * world
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (microbatches * ROWS, SEQUENCE + 1), generator=generator)
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    for job in ("pipeplan-zbv", "torch-ZBVZeroBubble"):
        own = [rank, count - 1 - rank]  # a V: rank r holds stages r and 2P - 1 - r
        stages = []
        for index in own:
            shapes = stage_shapes(index, count)
            stages.append(LocalTurnStage(Stage(index, count), index, count, torch.device("cpu"),
                                        input_args=shapes[0], output_args=shapes[1]))
        if job == "pipeplan-zbv":
            schedule = _PipelineScheduleRuntime(stages, microbatches, loss_fn=loss_fn)
            schedule._load_csv(csv_path, format="compute_only")
        else:
            schedule = ScheduleZBVZeroBubble(stages, microbatches, loss_fn=loss_fn)
        optimizer = torch.optim.AdamW([p for s in stages for p in s.submod.parameters()], lr=1e-3)
        means = []  # per step, the mean loss of its microbatches (on the last stage's rank)
        with profile_steps(os.path.join(out, job), warmup=1, active=steps, quiet=True) as step:
            for _ in range(1 + steps):
                optimizer.zero_grad()
                losses = []
                if 0 in own:
                    schedule.step(inputs, target=targets, losses=losses)
                else:
                    schedule.step(target=targets, losses=losses)
                optimizer.step()
                step()
                dist.barrier()  # every rank starts the next step together, as a loss
                #                 all-reduce or global grad-norm clipping would make them
                if losses:
                    means.append(sum(x.item() for x in losses) / len(losses))
        if means:
            print(f"{job}: {len(means)} steps, mean loss {means[0]:.4f} -> {means[-1]:.4f}",
                  flush=True)
        dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pipeplan(binary, *args):
    """Runs pipeplan, shows the command and its output; stops the example if it fails."""
    command = [binary, *map(str, args)]
    print("$ pipeplan " + " ".join(map(str, args)), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        sys.exit(f"pipeplan {args[0]} failed ({result.returncode})")
    return result.stdout


def measure(binary, out, job, ranks, plan=None):
    """Imports a job's traces, calibrates from them and diffs the simulated step against the
    measured one; returns the calibrated cost file."""
    traces = [os.path.join(out, job, f"rank{r}.json.gz") for r in range(ranks)]
    measured = os.path.join(out, f"{job}-measured.pb")
    ran = os.path.join(out, f"{job}-plan.pb")
    if plan is None:
        pipeplan(binary, "import", "--format", "torch-trace", *traces, "-o", measured,
                 "--plan-output", ran)
    else:
        pipeplan(binary, "import", "--format", "torch-trace", *traces, "--plan", plan, "-o",
                 measured)
        ran = plan
    profile = os.path.join(out, f"{job}-profile.json")
    costs = os.path.join(out, f"{job}-costs.txtpb")
    simulated = os.path.join(out, f"{job}-simulated.pb")
    pipeplan(binary, "profile", measured, "-o", profile)
    pipeplan(binary, "calibrate", profile, "-o", costs)
    pipeplan(binary, "simulate", ran, "--costs", costs, "--timeline", simulated)
    pipeplan(binary, "diff", simulated, measured, "--html", os.path.join(out, f"{job}-diff.html"))
    return costs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeplan", required=True, help="the pipeplan binary")
    parser.add_argument("--ranks", type=int, default=2, help="pipeline ranks (processes)")
    parser.add_argument("--steps", type=int, default=3, help="profiled steps per job")
    parser.add_argument("--out", help="where traces and results go (default: a temp dir)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="pipeplan-profile-")
    os.makedirs(out, exist_ok=True)
    p, m = args.ranks, 2 * args.ranks
    plan = os.path.join(out, "zbv.pb")
    csv_path = os.path.join(out, "zbv.csv")
    pipeplan(args.pipeplan, "plan", "--strategy", "zbv", "--ranks", p, "--stages-per-rank", 2,
             "--microbatches", m, "-o", plan)
    pipeplan(args.pipeplan, "export", plan, "--format", "torch-csv", "-o", csv_path)
    mp.spawn(train, args=(p, free_port(), csv_path, out, args.steps), nprocs=p, join=True)
    costs = measure(args.pipeplan, out, "pipeplan-zbv", p, plan=plan)
    compare_activations(os.path.join(out, "pipeplan-zbv-profile.json"), 2 * p)
    measure(args.pipeplan, out, "torch-ZBVZeroBubble", p)
    pipeplan(args.pipeplan, "plan", "--strategy", "auto", "--ranks", p, "--stages-per-rank", 2,
             "--microbatches", m,
             "--costs", costs, "-o", os.path.join(out, "replanned.pb"))
    print(f"profile_torch_job: done; traces, cost models and diff reports in {out}")


if __name__ == "__main__":
    main()
