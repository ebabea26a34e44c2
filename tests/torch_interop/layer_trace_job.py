"""A model's layers marked for `pipeplan import --format torch-layer-trace`: a plain training
loop in one process (`--loop`), and torch's Schedule1F1B or ScheduleInterleaved1F1B
(`--interleaved`) over two Gloo processes (launched by torchrun), each rank marking the layers
it holds.

    python layer_trace_job.py --loop --out DIR
    torchrun --nproc-per-node 2 layer_trace_job.py --out DIR [--interleaved]

The model: an embedding, a Linear, a layer that sleeps 20 ms in its forward and 30 ms in its
backward (a known cost to find again), and an LM head; 2 microbatches of 2 x 16 tokens (the
loop) or 4 (the pipeline), 1 warm-up step and 2 profiled ones.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipeplan_profiler import profile_steps  # noqa: E402  (the repository's helper, tested here)

VOCAB, HIDDEN, ROWS, TOKENS = 100, 64, 2, 16
SLEEP_FORWARD_S, SLEEP_BACKWARD_S = 0.020, 0.030


class Sleep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(SLEEP_FORWARD_S)
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        time.sleep(SLEEP_BACKWARD_S)
        return grad * 1.0


class SlowLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return Sleep.apply(self.linear(x))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(HIDDEN, HIDDEN), SlowLayer()])
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class Stage(torch.nn.Module):
    """Some of the model's layers, run in order (a pipeline stage)."""

    def __init__(self, layers):
        super().__init__()
        self.names = list(layers)
        self.layers = torch.nn.ModuleList(layers.values())

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def loss_fn(logits, targets):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def tokens(microbatches):
    return torch.randint(0, VOCAB, (microbatches * ROWS, TOKENS),
                         generator=torch.Generator().manual_seed(3))


def run_loop(out):
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = tokens(2)
    with profile_steps(out, warmup=1, active=2, quiet=True, layers=model) as next_step:
        for _ in range(3):
            for microbatch in batch.chunk(2):
                loss_fn(model(microbatch), microbatch).backward()
            optimizer.step()
            optimizer.zero_grad()
            next_step()


def make_stage(layers, index, count):
    from torch.distributed.pipelining import PipelineStage
    first = torch.empty(ROWS, TOKENS, dtype=torch.long, device="meta")
    hidden = torch.empty(ROWS, TOKENS, HIDDEN, device="meta")
    logits = torch.empty(ROWS, TOKENS, VOCAB, device="meta")
    return PipelineStage(Stage(layers), index, count, torch.device("cpu"),
                         input_args=first if index == 0 else hidden,
                         output_args=logits if index == count - 1 else hidden)


def run_pipeline(out, rank, interleaved):
    """Schedule1F1B, one stage of two layers per rank; or ScheduleInterleaved1F1B, a stage per
    layer, rank 0 holding stages 0 and 2 (embed, layers.1), rank 1 stages 1 and 3 (layers.0,
    head): a rank's layers are then apart in the model."""
    from torch.distributed.pipelining import Schedule1F1B, ScheduleInterleaved1F1B
    model = Model()
    named = [("embed", model.embed), ("layers.0", model.layers[0]),
             ("layers.1", model.layers[1]), ("head", model.head)]
    if interleaved:
        stages = [make_stage(dict([named[i]]), i, 4) for i in (rank, rank + 2)]
        schedule = ScheduleInterleaved1F1B(stages, 4, loss_fn=loss_fn)
    else:
        stages = [make_stage(dict(named[2 * rank:2 * rank + 2]), rank, 2)]
        schedule = Schedule1F1B(stages[0], 4, loss_fn=loss_fn)
    first, last = rank == 0, rank == 1  # either way: the embedding on rank 0, the head on 1
    held = {name: module for stage in stages
            for name, module in zip(stage.submod.names, stage.submod.layers)}
    batch = tokens(4)
    with profile_steps(out, warmup=1, active=2, quiet=True, schedule=schedule,
                       layers=held) as next_step:
        for _ in range(3):
            schedule.step(*((batch,) if first else ()),
                          **({"target": batch, "losses": []} if last else {}))
            for stage in stages:
                stage.submod.zero_grad(set_to_none=True)
            next_step()
            dist.barrier()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--loop", action="store_true")
    p.add_argument("--interleaved", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.loop:
        run_loop(args.out)
        return
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]),
                            timeout=datetime.timedelta(seconds=60))
    run_pipeline(args.out, rank, args.interleaved)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
