"""A small training job as a user writes it, for tests/python/test_torch.py: a stack of layers
split into stages, run by 2 local Gloo processes, either through pipeplan.torch.schedule (any
strategy) or through torch's own Schedule1F1B (the reference). Each rank saves its layers'
gradients after the first step and the last stage's loss of every step to OUT/rank<r>.pt.

    python torch_job.py --out DIR [--strategy zbv | --torch-1f1b] [--steps 3] [--traces DIR]

--traces: the steps after the first are profiled with pipeplan.torch.profile_steps (the traces
pipeplan.import_torch_traces reads).
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

RANKS = 2
LAYERS = 4  # P * V for V = 2; torch's Schedule1F1B holds two per rank
WIDTH = 32
MICROBATCHES = 4
ROWS = 16  # per microbatch


def layer(index):
    torch.manual_seed(100 + index)  # the same parameters whoever builds it
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())


def batch():
    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(MICROBATCHES * ROWS, WIDTH, generator=generator)
    return inputs, torch.sin(inputs)


def run(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(seconds=120))
    try:
        shape = {"input_args": torch.empty(ROWS, WIDTH), "output_args": torch.empty(ROWS, WIDTH)}
        if args.torch_1f1b:
            layers = {2 * rank + i: layer(2 * rank + i) for i in range(2)}
            module = torch.nn.Sequential(*layers.values())
            stage = PipelineStage(module, rank, RANKS, torch.device("cpu"), **shape)
            schedule = Schedule1F1B(stage, MICROBATCHES, loss_fn=torch.nn.functional.mse_loss)
            first, last = rank == 0, rank == RANKS - 1
        else:
            plan = pipeplan.plan(args.strategy, ranks=RANKS, microbatches=MICROBATCHES,
                                 stages_per_rank=LAYERS // RANKS, runtime="torch")
            layers = {index: layer(index) for index in plan.stage_indices(rank)}
            schedule = pipeplan.torch.schedule(plan, layers, loss_fn=torch.nn.functional.mse_loss,
                                               **shape)
            first, last = 0 in layers, LAYERS - 1 in layers
        optimizer = torch.optim.SGD([p for m in layers.values() for p in m.parameters()], lr=0.1)
        inputs, targets = batch()
        grads, losses_per_step = {}, []
        profiling = (pipeplan.torch.profile_steps(args.traces, warmup=1, active=args.steps - 1,
                                                  quiet=True)
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
                if last:
                    losses_per_step.append(torch.stack(losses).mean().item())
                optimizer.step()
                next_step()
        torch.save({"grads": grads, "losses": losses_per_step},
                   os.path.join(args.out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", default="zbv")
    parser.add_argument("--torch-1f1b", action="store_true")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--traces", help="profile the steps after the first into this directory")
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.multiprocessing.spawn(run, args=(args,), nprocs=RANKS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
