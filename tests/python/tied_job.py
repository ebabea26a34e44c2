"""A model whose LM head shares its embedding's matrix, split by pipeplan.partition and run
through pipeplan.torch.split_model + schedule by 2 local Gloo processes, for
tests/python/test_torch.py. Each rank saves the tied matrix's gradient after the first step,
the matrix after the last, and the last stage's mean loss of every step to OUT/rank<r>.pt.

    python tied_job.py --out DIR --strategy interleaved-1f1b [--steps 3]
"""

import argparse
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing

import pipeplan
import pipeplan.torch

VOCAB, WIDTH, SEQ, ROWS, MICROBATCHES, RANKS = 50, 16, 6, 2, 4, 2


class TiedDecoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.tok_embeddings = torch.nn.Embedding(VOCAB, WIDTH)
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()) for _ in range(4))
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.output = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


NAMES = ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "norm", "output"]


def layer_costs():
    """Fixed figures (the heavy ends of a large vocabulary), so that the split is the same on
    every rank and every run: the embedding and the head land on different stages."""
    heavy = {"tok_embeddings": 2.0, "output": 6.0, "norm": 0.2}
    return [{"name": name, "forward": heavy.get(name, 1.0), "backward_input": heavy.get(name, 1.0),
             "backward_weight": heavy.get(name, 1.0)} for name in NAMES]


def loss_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def batch():
    tokens = torch.randint(0, VOCAB, (MICROBATCHES * ROWS, SEQ),
                           generator=torch.Generator().manual_seed(1))
    return tokens, (tokens + 1) % VOCAB


def run(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(seconds=120))
    try:
        model = TiedDecoder()
        if rank == 1:  # another start: the schedule makes the copies the lowest rank's
            with torch.no_grad():
                model.tok_embeddings.weight.add_(1.0)
        split = pipeplan.partition(layer_costs(), ranks=RANKS, microbatches=MICROBATCHES,
                                   strategy=args.strategy, runtime="torch")
        stages = pipeplan.torch.split_model(model, split)
        schedule = pipeplan.torch.schedule(split.plan, stages, loss_fn=loss_fn)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        tokens, targets = batch()
        first, last = 0 in stages, len(split.stages) - 1 in stages
        holds = any(name in ("tok_embeddings", "output")
                    for s in stages.values() for name in s.names)
        grad, losses_per_step = None, []
        for step in range(args.steps):
            optimizer.zero_grad()
            losses = []
            schedule.step(*((tokens,) if first else ()),
                          **({"target": targets, "losses": losses} if last else {}))
            if step == 0 and holds:
                grad = model.tok_embeddings.weight.grad.clone()
            if last:
                losses_per_step.append(torch.stack(losses).mean().item())
            optimizer.step()
        torch.save({"stages": split.stages, "stage_indices": sorted(stages), "grad": grad,
                    "weight": model.tok_embeddings.weight.detach().clone() if holds else None,
                    "losses": losses_per_step}, os.path.join(args.out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", required=True)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.multiprocessing.spawn(run, args=(args,), nprocs=RANKS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
