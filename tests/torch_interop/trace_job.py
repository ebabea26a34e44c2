"""A torch.distributed.pipelining job under torch.profiler: torch's schedule runtime runs each
pipeplan plan given (its torch CSV, loaded with _PipelineScheduleRuntime._load_csv) and each of
torch's own V schedules named, and every rank writes one Chrome trace per job, as users' jobs do.

    python trace_job.py [CSV...] [--torch-schedule NAME]... --out DIR [--microbatches M]
                        [--device cpu|cuda] [--hidden H] [--rows R] [--steps N]

Writes DIR/<csv name or schedule name>/rank<r>.json.gz through python/pipeplan_profiler.py.
Launch with torchrun (one process per rank; Gloo on CPU, NCCL on CUDA) or alone for a one-rank
plan. A CSV says its stages and microbatches; torch's V schedules (ScheduleZBVZeroBubble,
ScheduleDualPipeV) get two stages per rank in a V and --microbatches, its single-stage ones
(Schedule1F1B, ScheduleGPipe, which torch 2.11 does not mark: pipeplan_profiler does) one
stage per rank.
The model: per stage LayerNorm + Linear(H, 4H) + GELU + Linear(4H, H), R rows per microbatch.
"""
import argparse
import csv
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipeplan_profiler import profile_steps  # noqa: E402  (the repository's helper, tested here)


class LocalTurnStage(PipelineStage):
    """Drops torch 2.11's warm-up send to a stage's own rank (a V placement's turn, or one
    rank holding every stage): Gloo has no connection to itself and the schedule never sends
    between local stages."""

    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops()
                if op.group_peer != self.group_rank]


def stage_module(stage, hidden):
    torch.manual_seed(1000 + stage)
    return torch.nn.Sequential(
        torch.nn.LayerNorm(hidden), torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
        torch.nn.Linear(4 * hidden, hidden))


def read_plan(csv_path):
    """Every rank's actions, as torch parses the CSV."""
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    return [[a for a in (_Action.from_str(cell) for cell in row) if a is not None] for row in rows]


def leaves(action):
    return action.sub_actions or (action,)


def mse(out, target):
    return torch.nn.functional.mse_loss(out, target)


def make_stages(own, num_stages, device, args):
    meta = torch.empty(args.rows, args.hidden, device="meta")
    return [LocalTurnStage(stage_module(s, args.hidden).to(device), s, num_stages, device,
                           input_args=meta, output_args=meta) for s in own]


def profile_schedule(schedule, stages, num_stages, microbatches, name, device, args):
    """Runs 1 + args.steps steps of `schedule` (the first one not profiled); returns the path
    of this rank's trace."""
    own = {stage.stage_index for stage in stages}
    g = torch.Generator().manual_seed(7)
    inputs = torch.randn(microbatches * args.rows, args.hidden, generator=g).to(device)
    targets = torch.randn(microbatches * args.rows, args.hidden, generator=g).to(device)
    out = os.path.join(args.out, name)
    with profile_steps(out, warmup=1, active=args.steps, quiet=True,
                       schedule=schedule) as next_step:
        for _ in range(1 + args.steps):
            step_args = (inputs,) if 0 in own else ()
            if num_stages - 1 in own:
                schedule.step(*step_args, target=targets, losses=[])
            else:
                schedule.step(*step_args)
            # torch's default: gradients freed here, allocated again by the next backward.
            for s in stages:
                s.submod.zero_grad(set_to_none=True)
            next_step()
            # A training loop's per-step sync (loss logging, global grad-norm clipping): every
            # rank starts the next step together, so no step begins behind the last one's tail.
            dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return os.path.join(out, f"rank{dist.get_rank()}.json.gz")


def profile_plan(csv_path, rank, device, args):
    rows = read_plan(csv_path)
    everything = [leaf for row in rows for a in row for leaf in leaves(a)]
    num_stages = 1 + max(a.stage_index for a in everything)
    microbatches = 1 + max(a.microbatch_index for a in everything)
    own = sorted({leaf.stage_index for a in rows[rank] for leaf in leaves(a)})
    stages = make_stages(own, num_stages, device, args)
    schedule = _PipelineScheduleRuntime(stages, microbatches, loss_fn=mse)
    schedule._load_csv(csv_path, format="compute_only")
    name = os.path.splitext(os.path.basename(csv_path))[0]
    return profile_schedule(schedule, stages, num_stages, microbatches, name, device, args)


SINGLE_STAGE = ["Schedule1F1B", "ScheduleGPipe"]
V_SHAPED = ["ScheduleZBVZeroBubble", "ScheduleDualPipeV"]


def profile_torch_schedule(name, rank, world, device, args):
    """Torch's own schedule, as torch builds it: a V (two stages per rank, r and 2P - 1 - r) or
    one stage per rank."""
    if name in SINGLE_STAGE:
        num_stages = world
        stages = make_stages([rank], num_stages, device, args)
        schedule = getattr(schedules, name)(stages[0], args.microbatches, loss_fn=mse)
    else:
        num_stages = 2 * world
        stages = make_stages([rank, num_stages - 1 - rank], num_stages, device, args)
        schedule = getattr(schedules, name)(stages, args.microbatches, loss_fn=mse)
    return profile_schedule(schedule, stages, num_stages, args.microbatches, name, device, args)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv", nargs="*")
    p.add_argument("--torch-schedule", action="append", default=[],
                   choices=V_SHAPED + SINGLE_STAGE)
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    if args.device == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    for csv_path in args.csv:
        print(f"rank {rank}: wrote {profile_plan(csv_path, rank, device, args)}", flush=True)
        dist.barrier()
    for name in args.torch_schedule:
        print(f"rank {rank}: wrote {profile_torch_schedule(name, rank, world, device, args)}",
              flush=True)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
