"""A torch.distributed.pipelining training job that takes its schedule from pipeplan.

Every rank asks pipeplan (through torch.ops, no other Python dependency) for the plan of the
strategy and costs given on the command line, hands its rows to torch's own runtime
(_PipelineScheduleRuntime._load_csv) and trains a small MLP split into P * V stages, on CPU
over Gloo.

    # P local processes (127.0.0.1), spawned by this script:
    python examples/torch_schedule_from_pipeplan.py \\
        --ops-library "$(bash scripts/build_dir.sh)/torch_ext/libpipeplan_torch_ops.so" \\
        --strategy zbv --ranks 4 --microbatches 8 --steps 5

    # or one process per rank from torchrun (it sets RANK, WORLD_SIZE, MASTER_ADDR/PORT):
    torchrun --nproc-per-node 4 examples/torch_schedule_from_pipeplan.py --ops-library ...

The rank holding the last stage prints the loss of every step; the job fails unless the loss
went down. What torch's grammar cannot express (post-validation, rollback) is left out and
printed as a note. See docs/torch-interop.md.
"""

import argparse
import csv
import datetime
import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

WIDTH = 16
ROWS_PER_MICROBATCH = 4


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops-library", default=os.environ.get("PIPEPLAN_TORCH_OPS_LIBRARY"),
                        help="path of libpipeplan_torch_ops.so (default: "
                             "$PIPEPLAN_TORCH_OPS_LIBRARY)")
    parser.add_argument("--strategy", default="zbv", help="any `pipeplan plan` strategy")
    parser.add_argument("--ranks", type=int, default=2,
                        help="local processes to spawn (ignored under torchrun)")
    parser.add_argument("--stages-per-rank", type=int, default=None,
                        help="V (default: the smallest the strategy accepts)")
    parser.add_argument("--microbatches", type=int, default=None, help="M (default: 2P)")
    parser.add_argument("--forward", type=float, default=1.0, help="cost of F per stage")
    parser.add_argument("--backward-input", type=float, default=1.0, help="cost of I")
    parser.add_argument("--backward-weight", type=float, default=1.0, help="cost of W")
    parser.add_argument("--format", default="torch-csv-comms",
                        choices=["torch-csv", "torch-csv-comms"],
                        help="torch-csv: torch inserts the transfers; torch-csv-comms: "
                             "pipeplan's transfers, receives placed late")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    if not args.ops_library:
        parser.error("--ops-library is required (or set $PIPEPLAN_TORCH_OPS_LIBRARY)")
    return args


class GlooPipelineStage(PipelineStage):
    """torch 2.11 posts a stage's warm-up send/receive to its own rank when the neighbouring
    stage is local (the turn of a V placement: zbv, dualpipe-v, ...), which Gloo cannot do;
    torch's own ScheduleZBVZeroBubble fails the same way. The warm-up only opens connections,
    so the self-addressed ops can be dropped. Not needed with NCCL."""

    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops()
                if op.group_peer != self.group_rank]


def stage_module(stage, num_stages):
    torch.manual_seed(stage)  # the same parameters whichever rank builds the stage
    layers = [torch.nn.Linear(WIDTH, WIDTH)]
    if stage != num_stages - 1:
        layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def data(microbatches):
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(microbatches * ROWS_PER_MICROBATCH, WIDTH, generator=generator)
    teacher = torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH ** 0.5
    return inputs, inputs @ teacher


def plan_from_pipeplan(args, ranks, microbatches):
    """pipeplan's rows for every rank (torch's action strings), its metrics and notes."""
    kwargs = {"forward": args.forward, "backward_input": args.backward_input,
              "backward_weight": args.backward_weight, "format": args.format}
    if args.stages_per_rank is not None:
        kwargs["stages_per_rank"] = args.stages_per_rank
    actions, metrics_json, notes = torch.ops.pipeplan.plan(args.strategy, ranks, microbatches,
                                                           **kwargs)
    return actions, json.loads(metrics_json), notes


def own_stages(row):
    stages = set()
    for cell in row:
        action = _Action.from_str(cell)
        for leaf in action.sub_actions or (action,):
            stages.add(leaf.stage_index)
    return sorted(stages)


def train(rank, world, args):
    torch.set_num_threads(1)
    torch.ops.load_library(args.ops_library)
    microbatches = args.microbatches or 2 * world
    actions, metrics, notes = plan_from_pipeplan(args, world, microbatches)
    num_stages = world * metrics["stages_per_rank"]
    if rank == 0:
        print(f"pipeplan: {metrics['strategy']} P={world} V={metrics['stages_per_rank']} "
              f"M={microbatches}: simulated makespan {metrics['makespan']}, "
              f"bubble {metrics['bubble_fraction_max']:.3f}", flush=True)
        for note in notes:
            print(f"pipeplan note: {note}", flush=True)

    own = own_stages(actions[rank])
    modules = [stage_module(stage, num_stages) for stage in own]
    shape = torch.empty(ROWS_PER_MICROBATCH, WIDTH, device="meta")
    stages = [GlooPipelineStage(module, stage, num_stages, torch.device("cpu"),
                                input_args=shape, output_args=shape)
              for stage, module in zip(own, modules)]
    schedule = _PipelineScheduleRuntime(stages, microbatches,
                                        loss_fn=torch.nn.functional.mse_loss)
    # torch's loader takes a file: write pipeplan's rows as the CSV it expects.
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as f:
        csv.writer(f).writerows(actions)
    try:
        schedule._load_csv(f.name, format={"torch-csv": "compute_only",
                                            "torch-csv-comms": "compute_comms"}[args.format])
    finally:
        os.unlink(f.name)

    optimizer = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=args.lr)
    inputs, targets = data(microbatches)
    history = []
    for step in range(args.steps):
        optimizer.zero_grad()
        losses = []
        step_args = (inputs,) if 0 in own else ()
        if num_stages - 1 in own:
            schedule.step(*step_args, target=targets, losses=losses)
            history.append(torch.stack(losses).mean().item())
            print(f"step {step}: loss {history[-1]:.6f}", flush=True)
        else:
            schedule.step(*step_args)
        optimizer.step()
    if history:
        if not history[-1] < history[0]:
            raise SystemExit(f"the loss did not go down: {history}")
        print(f"trained {args.steps} steps with pipeplan's {metrics['strategy']} schedule: "
              f"loss {history[0]:.6f} -> {history[-1]:.6f}", flush=True)


def spawned(rank, world, args):
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        train(rank, world, args)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    if "RANK" in os.environ:  # torchrun
        dist.init_process_group("gloo")
        try:
            train(dist.get_rank(), dist.get_world_size(), args)
        finally:
            dist.destroy_process_group()
        return 0
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                      GLOO_SOCKET_IFNAME="lo")
    torch.multiprocessing.spawn(spawned, args=(args.ranks, args), nprocs=args.ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
