"""A second model written as a user would (2026-11-29, to try the loop on a model the advice was
not tuned on): a causal transformer LM, token embedding + learned positions, 8 pre-norm
attention blocks (blocks 3 and 7 with a 4x wider FFN), an LM head over a 2048-token vocabulary
that costs several blocks, AdamW. Same command line as mixer_job.py:

    JOB=transformer_job.py bash bench/user_loop/run.sh
"""
import argparse, datetime, os, statistics, sys, time
import torch, torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, schedules
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipeplan_profiler import profile_steps

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

class LocalTurnStage(PipelineStage):
    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops() if op.group_peer != self.group_rank]

def make_stage(s, n):
    per = len(FFN) // n
    torch.manual_seed(5 + s)
    mod = Part(range(s * per, (s + 1) * per), s == 0, s == n - 1)
    inp = torch.empty(ROWS, SEQ, dtype=torch.long, device="meta") if s == 0 else torch.empty(ROWS, SEQ, DIM, device="meta")
    out = torch.empty(ROWS, SEQ, VOCAB if s == n - 1 else DIM, device="meta")
    return LocalTurnStage(mod, s, n, torch.device("cpu"), input_args=inp, output_args=out)

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--schedule"); p.add_argument("--csv"); p.add_argument("--stages", type=int, default=2)
    p.add_argument("--placement", default="loop"); p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--profile"); p.add_argument("--steps", type=int, default=12)
    a = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    S = a.stages
    own = [rank] if S == world else ([rank, S - 1 - rank] if a.placement == "v" else list(range(rank, S, world)))
    stages = [make_stage(s, S) for s in own]
    opt = torch.optim.AdamW([q for st in stages for q in st.submod.parameters()], lr=1e-4)
    M = a.microbatches
    if a.csv:
        sched = _PipelineScheduleRuntime(stages, M, loss_fn=loss_fn)
        sched._load_csv(a.csv, format="compute_only")
    else:
        cls = getattr(schedules, a.schedule)
        sched = cls(stages[0] if S == world else stages, M, loss_fn=loss_fn)
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=g)
    y = torch.roll(x, -1, 1)
    has_first, has_last = 0 in own, S - 1 in own
    def step():
        opt.zero_grad(set_to_none=True)
        losses = []
        args = (x,) if has_first else ()
        if has_last: sched.step(*args, target=y, losses=losses)
        else: sched.step(*args)
        opt.step()
        return losses
    if a.profile:
        with profile_steps(a.profile, warmup=2, active=a.steps, quiet=True, schedule=sched) as nxt:
            for _ in range(2 + a.steps):
                step(); nxt(); dist.barrier()
    else:
        times = []
        for i in range(3 + a.steps):
            dist.barrier(); t = time.perf_counter(); losses = step(); dist.barrier()
            if i >= 3: times.append(time.perf_counter() - t)
        if has_last and losses: print(f"rank {rank} loss {sum(l.item() for l in losses)/len(losses):.6f}", flush=True)
        if rank == 0: print(f"median step {statistics.median(times)*1e3:.2f} ms", flush=True)
    dist.destroy_process_group()

main()
