"""A model written as a user would, not one of the repository's test models, trained with
torch.distributed.pipelining over Gloo (P = 2, M = 8 by default): token embedding, 8 mixer
blocks of uneven width (token-mixing Linear across the sequence + channel MLP), LM head with
cross-entropy, SGD. Runs one schedule (a torch class by name, or a pipeplan plan's CSV through
_load_csv) and either profiles it with python/pipeplan_profiler.py (--profile DIR) or times
it (rank 0 prints the median step of --steps after 3 warm-up steps).

    python -m torch.distributed.run --nproc-per-node 2 mixer_job.py --schedule Schedule1F1B
    python -m torch.distributed.run --nproc-per-node 2 mixer_job.py --csv plan.csv
"""
import torch
import torch.nn as nn

from job_main import lm_stage, run

VOCAB, DIM, SEQ, ROWS = 768, 128, 48, 4
WIDTHS = [256, 512, 256, 1024, 256, 512, 256, 1024]

class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.tok = nn.Linear(SEQ, SEQ)
        self.up, self.down = nn.Linear(DIM, width), nn.Linear(width, DIM)
    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.down(torch.nn.functional.gelu(self.up(self.n2(x))))

class Piece(nn.Module):
    def __init__(self, blocks, first, last):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM) if first else None
        self.blocks = nn.Sequential(*[Block(WIDTHS[b]) for b in blocks])
        self.head = nn.Sequential(nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)) if last else None
    def forward(self, x):
        if self.embed is not None: x = self.embed(x)
        x = self.blocks(x)
        return self.head(x) if self.head is not None else x

def loss_fn(out, target):
    return nn.functional.cross_entropy(out.flatten(0, 1), target.flatten())

def make_stage(s, num_stages):
    per = len(WIDTHS) // num_stages
    torch.manual_seed(100 + s)
    mod = Piece(range(s * per, (s + 1) * per), s == 0, s == num_stages - 1)
    return lm_stage(mod, s, num_stages, ROWS, SEQ, DIM, VOCAB)


def make_batch(M):
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=g)
    return x, torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=g)


run(make_stage, loss_fn, lambda params: torch.optim.SGD(params, lr=1e-3), make_batch)
