"""A small training job as a user writes it, for tests/python/test_torch.py: a stack of layers
split into stages, run by 2 (or 4) local Gloo processes, either through
pipeplan.torch.schedule (any strategy) or through torch's own Schedule1F1B (the reference).
Each rank saves its layers' gradients after the first step and the last stage's loss of every
step to OUT/rank<r>.pt.

    python torch_job.py --out DIR [--strategy zbv | --torch-1f1b] [--ranks 2] [--steps 3]
                        [--traces DIR [--mark-layers]]

--traces: the steps after the first are profiled with pipeplan.torch.profile_steps (the traces
pipeplan.import_torch_traces reads); --mark-layers also marks each layer (the traces
pipeplan.import_layer_traces reads).
"""

import contextlib

import argparse
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing
from torch.distributed.pipelining import PipelineStage, Schedule1F1B

import pipeplan
import pipeplan.torch

LAYERS = 4  # P * V for P = 2, V = 2; torch's Schedule1F1B holds LAYERS / P per rank
WIDTH = 32
ROWS = 16  # per microbatch


def layer(index, seed=100):
    torch.manual_seed(seed + index)  # the same parameters whoever builds it
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())


def batch(microbatches):
    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(microbatches * ROWS, WIDTH, generator=generator)
    return inputs, torch.sin(inputs)


def run(rank, args):
    ranks = args.ranks
    microbatches = 2 * ranks  # dualpipe's least
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=120))
    try:
        shape = {"input_args": torch.empty(ROWS, WIDTH), "output_args": torch.empty(ROWS, WIDTH)}
        if args.torch_1f1b:
            per_rank = LAYERS // ranks
            layers = {i: layer(i) for i in range(rank * per_rank, (rank + 1) * per_rank)}
            module = torch.nn.Sequential(*layers.values())
            stage = PipelineStage(module, rank, ranks, torch.device("cpu"), **shape)
            schedule = Schedule1F1B(stage, microbatches, loss_fn=torch.nn.functional.mse_loss)
            first, last = rank == 0, rank == ranks - 1
            copy_b = {}
        else:
            dual = args.strategy == "dualpipe"  # torch's runtime does not run it: no runtime=
            plan = pipeplan.plan(args.strategy, ranks=ranks, microbatches=microbatches,
                                 **({} if dual else {"runtime": "torch",
                                                     "stages_per_rank": LAYERS // ranks}))
            # A dual plan's stage P + d is the second copy of the model's stage d, built
            # here from other weights: the schedule makes them the first copy's.
            depths = ranks if dual else LAYERS
            per_stage = LAYERS // depths
            def layers_of(s):  # the model's layers of stage s's depth
                first = s % depths * per_stage
                return [layer(i, seed=100 if s < depths else 200)
                        for i in range(first, first + per_stage)]
            stage_layers = {s: layers_of(s) for s in plan.stage_indices(rank)}
            modules = {s: torch.nn.Sequential(*built) for s, built in stage_layers.items()}
            if args.ddp:  # what a dual plan refuses
                modules = {s: torch.nn.parallel.DistributedDataParallel(m)
                           for s, m in modules.items()}
            schedule = pipeplan.torch.schedule(plan, modules,
                                               loss_fn=torch.nn.functional.mse_loss, **shape)
            first = any(s % depths == 0 for s in modules)
            last = any(s % depths == depths - 1 for s in modules)
            layers = {i: module for s, built in stage_layers.items() if s < depths
                      for i, module in zip(range(s * per_stage, LAYERS), built)}
            copy_b = {i: module for s, built in stage_layers.items() if s >= depths
                      for i, module in zip(range((s - depths) * per_stage, LAYERS), built)}
        optimizer = torch.optim.SGD([p for m in [*layers.values(), *copy_b.values()]
                                     for p in m.parameters()], lr=0.1)
        inputs, targets = batch(microbatches)
        grads, grads_copy_b, losses_per_step = {}, {}, []
        # --mark-layers: each layer this rank holds, under its name in the model.
        marked = ({f"layers.{i}": m for i, m in sorted(layers.items())} if args.mark_layers
                  else None)
        profiling = (pipeplan.torch.profile_steps(args.traces, warmup=1, active=args.steps - 1,
                                                  quiet=True, schedule=schedule,
                                                  layers=marked)
                     if args.traces else contextlib.nullcontext(lambda: None))
        with profiling as next_step:
            for step in range(args.steps):
                optimizer.zero_grad()
                losses = []
                schedule.step(*((inputs,) if first else ()),
                              **({"target": targets, "losses": losses} if last else {}))
                if step == 0:
                    grads = {index: [p.grad.clone() for p in m.parameters()]
                             for index, m in layers.items()}
                    grads_copy_b = {index: [p.grad.clone() for p in m.parameters()]
                                    for index, m in copy_b.items()}
                if last:
                    assert len(losses) == microbatches, losses
                    losses_per_step.append(torch.stack(losses).mean().item())
                optimizer.step()
                next_step()
        torch.save({"grads": grads, "grads_copy_b": grads_copy_b, "losses": losses_per_step},
                   os.path.join(args.out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", default="zbv")
    parser.add_argument("--torch-1f1b", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2, choices=(2, 4))
    parser.add_argument("--ddp", action="store_true", help="wrap each stage in DDP")
    parser.add_argument("--traces", help="profile the steps after the first into this directory")
    parser.add_argument("--mark-layers", action="store_true",
                        help="with --traces: mark each layer's forward and backward")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.multiprocessing.spawn(run, args=(args,), nprocs=args.ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
