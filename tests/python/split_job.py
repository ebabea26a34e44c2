"""A model of top-level layers split by pipeplan.partition and run through
pipeplan.torch.split_model + schedule by 2 local Gloo processes, for tests/python/test_torch.py:
--model tied, whose LM head shares its embedding's matrix; --model aux, whose blocks pass an
auxiliary loss on beside their output (a tuple, as mixture-of-experts blocks do). Each rank
saves the gradients of its layers' parameters after the first step (by the parameter's first
name in the model), those parameters after the last step, and the last stage's mean loss of
every step to OUT/rank<r>.pt.

    python split_job.py --out DIR --model tied|aux --strategy interleaved-1f1b [--steps 3]
                        [--free] [--wrap ddp|fsdp]
"""

import argparse
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

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


class AuxBlock(torch.nn.Module):
    """Takes (x, aux) and returns (x + f(x), aux + a load-balancing-like term of f(x)); aux
    holds one figure per row, so that torch can join the microbatches' outputs."""

    def __init__(self):
        super().__init__()
        self.mlp = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh())

    def forward(self, inputs):
        x, aux = inputs
        y = self.mlp(x)
        return x + y, aux + 0.01 * y.pow(2).mean(dim=(1, 2))


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(VOCAB, WIDTH)

    def forward(self, tokens):
        x = self.table(tokens)
        return x, x.new_zeros(x.shape[0])


class AuxHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.output = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, inputs):
        x, aux = inputs
        return self.output(self.norm(x)), aux  # passed on as it came


class AuxDecoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.tok_embeddings = Embed()
        self.layers = torch.nn.ModuleList(AuxBlock() for _ in range(4))
        self.head = AuxHead()

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


MODELS = {"tied": TiedDecoder, "aux": AuxDecoder}
NAMES = {"tied": ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "norm",
                  "output"],
         "aux": ["tok_embeddings", "layers.0", "layers.1", "layers.2", "layers.3", "head"]}


def layer_costs(model):
    """Fixed figures (the heavy ends of a large vocabulary), so that the split is the same on
    every rank and every run: the embedding and the head land on different stages."""
    heavy = {"tok_embeddings": 2.0, "output": 6.0, "head": 6.0, "norm": 0.2}
    return [{"name": name, "forward": heavy.get(name, 1.0), "backward_input": heavy.get(name, 1.0),
             "backward_weight": heavy.get(name, 1.0)} for name in NAMES[model]]


def loss_fn(output, target):
    logits, aux = output if isinstance(output, tuple) else (output, torch.zeros(1))
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten()) + aux.mean()


def batch():
    tokens = torch.randint(0, VOCAB, (MICROBATCHES * ROWS, SEQ),
                           generator=torch.Generator().manual_seed(1))
    return tokens, (tokens + 1) % VOCAB


def run(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(seconds=120))
    try:
        model = MODELS[args.model]()
        if rank == 1 and args.model == "tied":  # another start: the schedule makes the
            with torch.no_grad():                  # copies the lowest rank's
                model.tok_embeddings.weight.add_(1.0)
        split = pipeplan.partition(layer_costs(args.model), ranks=RANKS,
                                   microbatches=MICROBATCHES, strategy=args.strategy,
                                   runtime="torch")
        stages = pipeplan.torch.split_model(model, split, free_other_layers=args.free)
        if args.wrap:  # data parallel of one rank (its own group), as a 2-D job wraps stages
            groups = [dist.new_group([r]) for r in range(RANKS)]
            wrap = {"ddp": lambda m: torch.nn.parallel.DistributedDataParallel(
                        m, process_group=groups[rank]),
                    "fsdp": lambda m: fully_shard(m, mesh=DeviceMesh.from_group(groups[rank],
                                                                                 "cpu"))}
            wrapped = {index: wrap[args.wrap](stage) for index, stage in stages.items()}
        schedule = pipeplan.torch.schedule(split.plan, wrapped if args.wrap else stages,
                                           loss_fn=loss_fn)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        tokens, targets = batch()
        first, last = 0 in stages, len(split.stages) - 1 in stages
        name_of = {id(p): name for name, p in model.named_parameters()}
        held = {id(p): p for stage in stages.values() for p in stage.parameters()}
        grads, losses_per_step = {}, []
        for step in range(args.steps):
            optimizer.zero_grad()
            losses = []
            schedule.step(*((tokens,) if first else ()),
                          **({"target": targets, "losses": losses} if last else {}))
            if step == 0:
                grads = {name_of[key]: p.grad.clone() for key, p in held.items()}
            if last:
                losses_per_step.append(torch.stack(losses).mean().item())
            optimizer.step()
        torch.save({"stages": split.stages, "stage_indices": sorted(stages), "grads": grads,
                    "params": {name_of[key]: p.detach().clone() for key, p in held.items()},
                    "losses": losses_per_step}, os.path.join(args.out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--strategy", required=True)
    parser.add_argument("--free", action="store_true",
                        help="split_model(free_other_layers=True)")
    parser.add_argument("--wrap", choices=["ddp", "fsdp"],
                        help="wrap each stage in DDP or FSDP over a group of its own rank")
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
