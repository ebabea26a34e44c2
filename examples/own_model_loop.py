"""A model of my own through the documented loop, on CPU: measure_layers -> partition
(runtime="torch") -> split_model -> schedule, trained by 2 Gloo processes for 3 steps.

The model: token and position embeddings, six TransformerEncoderLayers of three feed-forward
widths, a LayerNorm and a head. Prints each layer's measured F, B, I and W ((I + W) / B: what
torch's split backward costs against a whole one), the split chosen, each step's mean loss,
and the first step's loss of the whole model run unsplit (it must equal the pipeline's).

    python examples/own_model_loop.py
"""

import datetime
import json
import os
import socket
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing

import pipeplan
import pipeplan.torch

VOCAB, HIDDEN, SEQ, ROWS, MICROBATCHES, RANKS = 500, 64, 32, 2, 4, 2


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, HIDDEN)
        self.pos = torch.nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.02)

    def forward(self, tokens):
        return self.tok(tokens) + self.pos


class GPTLike(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = Embed()
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(HIDDEN, 4, dim_feedforward=width, dropout=0.0,
                                             batch_first=True)
            for width in (128, 512, 128, 512, 1024, 128))
        self.ln = torch.nn.LayerNorm(HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def loss_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def batch():
    return torch.randint(0, VOCAB, (MICROBATCHES * ROWS, SEQ),
                         generator=torch.Generator().manual_seed(1))


def train(rank, layers, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS,
                            timeout=datetime.timedelta(seconds=120))
    try:
        model = GPTLike()
        split = pipeplan.partition(layers, ranks=RANKS, microbatches=MICROBATCHES,
                                   runtime="torch")
        # The layers other ranks hold are freed (meta tensors): this rank keeps its own.
        stages = pipeplan.torch.split_model(model, split, free_other_layers=True)
        schedule = pipeplan.torch.schedule(split.plan, stages, loss_fn=loss_fn)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        tokens = batch()
        first, last = 0 in stages, len(split.stages) - 1 in stages
        means = []
        for _ in range(3):
            losses = []
            schedule.step(*((tokens,) if first else ()),
                          **({"target": tokens, "losses": losses} if last else {}))
            optimizer.step()
            optimizer.zero_grad()
            if losses:
                means.append(torch.stack(losses).mean().item())
        if last:
            with open(out, "w") as f:
                json.dump({"strategy": split.plan.strategy, "stages": split.stages,
                           "losses": means}, f)
    finally:
        dist.destroy_process_group()


def main():
    torch.set_num_threads(1)
    model = GPTLike()
    tokens = batch()
    layers = pipeplan.torch.measure_layers(model, tokens[:ROWS], loss_fn, target=tokens[:ROWS])
    for layer in layers["layers"]:
        print(f"{layer['name']:9s} F {layer['forward']:.3f} B {layer['backward']:.3f} "
              f"I {layer['backward_input']:.3f} W {layer['backward_weight']:.3f} ms, (I + W) / B "
              f"{(layer['backward_input'] + layer['backward_weight']) / layer['backward']:.2f}")
    with torch.no_grad():
        whole = sum(loss_fn(model(tokens[i * ROWS:(i + 1) * ROWS]),
                            tokens[i * ROWS:(i + 1) * ROWS]).item()
                    for i in range(MICROBATCHES)) / MICROBATCHES
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "result.json")
        torch.multiprocessing.spawn(train, args=(layers, out), nprocs=RANKS)
        with open(out) as f:
            result = json.load(f)
    print(f"partition: {result['strategy']}, stages {result['stages']}")
    print("mean loss per step: " + ", ".join(f"{x:.4f}" for x in result["losses"])
          + f"; the whole model's first step: {whole:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
