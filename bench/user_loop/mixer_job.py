"""A model written as a user would, not one of the repository's test models, trained with
torch.distributed.pipelining over Gloo (P = 2, M = 8 by default): token embedding, 8 mixer
blocks of uneven width (token-mixing Linear across the sequence + channel MLP), LM head with
cross-entropy, SGD. Runs one schedule (a torch class by name, or a pipeplan plan's CSV through
_load_csv) and either profiles it with python/pipeplan_profiler.py (--profile DIR) or times
it (rank 0 prints the median step of --steps after 3 warm-up steps).

    python -m torch.distributed.run --nproc-per-node 2 mixer_job.py --schedule Schedule1F1B
    python -m torch.distributed.run --nproc-per-node 2 mixer_job.py --csv plan.csv
"""
import argparse, datetime, os, statistics, sys, time
import torch, torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, schedules
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipeplan_profiler import profile_steps

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

class LocalTurnStage(PipelineStage):
    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops() if op.group_peer != self.group_rank]

def make_stage(s, num_stages):
    per = len(WIDTHS) // num_stages
    torch.manual_seed(100 + s)
    mod = Piece(range(s * per, (s + 1) * per), s == 0, s == num_stages - 1)
    inp = torch.empty(ROWS, SEQ, dtype=torch.long, device="meta") if s == 0 else torch.empty(ROWS, SEQ, DIM, device="meta")
    out = torch.empty(ROWS, SEQ, VOCAB if s == num_stages - 1 else DIM, device="meta")
    return LocalTurnStage(mod, s, num_stages, torch.device("cpu"), input_args=inp, output_args=out)

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
    if S == world: own = [rank]
    elif a.placement == "v": own = [rank, S - 1 - rank]
    else: own = list(range(rank, S, world))
    stages = [make_stage(s, S) for s in own]
    params = [q for st in stages for q in st.submod.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)
    M = a.microbatches
    if a.csv:
        sched = _PipelineScheduleRuntime(stages, M, loss_fn=loss_fn)
        sched._load_csv(a.csv, format="compute_only")
    else:
        cls = getattr(schedules, a.schedule)
        sched = cls(stages[0] if S == world else stages, M, loss_fn=loss_fn)
    g = torch.Generator().manual_seed(7)
    x = torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=g)
    y = torch.randint(0, VOCAB, (M * ROWS, SEQ), generator=g)
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
