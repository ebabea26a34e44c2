"""A second model written as a user would (2026-11-29, to try the loop on a model the advice was
not tuned on): a causal transformer LM, token embedding + learned positions, 8 pre-norm
attention blocks (blocks 3 and 7 with a 4x wider FFN), an LM head over a 2048-token vocabulary
that costs several blocks, AdamW. Same command line as mixer_job.py:

    JOB=transformer_job.py bash bench/user_loop/run.sh
"""
import torch
import torch.nn as nn

from job_main import lm_stage, run

VOCAB, DIM, SEQ, ROWS, HEADS = 2048, 96, 32, 4, 4
FFN = [192, 192, 192, 768, 192, 192, 192, 768]

class Attn(nn.Module):
    def __init__(self, ffn):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(DIM, ffn), nn.ReLU(), nn.Linear(ffn, DIM))
        self.register_buffer("mask", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1), persistent=False)
    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.ff(self.ln2(x))

class Part(nn.Module):
    def __init__(self, blocks, first, last):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM) if first else None
        self.pos = nn.Parameter(torch.zeros(SEQ, DIM)) if first else None
        self.layers = nn.ModuleList([Attn(FFN[b]) for b in blocks])
        self.norm = nn.LayerNorm(DIM) if last else None
        self.out = nn.Linear(DIM, VOCAB, bias=False) if last else None
    def forward(self, x):
        if self.tok is not None: x = self.tok(x) + self.pos
        for l in self.layers: x = l(x)
        return self.out(self.norm(x)) if self.out is not None else x

def loss_fn(out, target):
    return nn.functional.cross_entropy(out.reshape(-1, VOCAB), target.reshape(-1))

def make_stage(s, n):
    per = len(FFN) // n
    torch.manual_seed(5 + s)
    mod = Part(range(s * per, (s + 1) * per), s == 0, s == n - 1)
    return lm_stage(mod, s, n, ROWS, SEQ, DIM, VOCAB)


def make_batch(M):
    x = torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=torch.Generator().manual_seed(11))
    return x, torch.roll(x, -1, 1)


run(make_stage, loss_fn, lambda params: torch.optim.AdamW(params, lr=1e-4), make_batch)
