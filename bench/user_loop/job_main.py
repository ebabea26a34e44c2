"""What the user-loop models share: the command line, torch pipelining over Gloo (stage
ownership by placement, a torch schedule class or a pipeplan CSV through _load_csv), one
training step (zero_grad(set_to_none=True), the schedule's step, the optimizer), and either
profiling with python/pipeplan_profiler.py (--profile DIR) or timing (rank 0 prints the median
step of --steps after 3 warm-up steps)."""
import argparse, datetime, os, statistics, sys, time
import torch, torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, schedules
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipeplan_profiler import profile_steps


class LocalTurnStage(PipelineStage):
    """A stage that skips the p2p warm-up with its own rank (V shapes hold two stages a rank)."""
    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops() if op.group_peer != self.group_rank]


def lm_stage(mod, s, num_stages, rows, seq, dim, vocab):
    """Stage s of a language model's pipeline: token ids into the first, hidden states of
    width `dim` between stages, logits over `vocab` out of the last (rows x seq each)."""
    meta = dict(device="meta")
    inp = torch.empty(rows, seq, dtype=torch.long, **meta) if s == 0 else torch.empty(rows, seq, dim, **meta)
    out = torch.empty(rows, seq, vocab if s == num_stages - 1 else dim, **meta)
    return LocalTurnStage(mod, s, num_stages, torch.device("cpu"), input_args=inp, output_args=out)


def run(make_stage, loss_fn, make_optimizer, make_batch):
    """make_stage(s, num_stages) -> PipelineStage; make_optimizer(params); make_batch(M) -> (x, y)."""
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
    opt = make_optimizer([q for st in stages for q in st.submod.parameters()])
    M = a.microbatches
    if a.csv:
        sched = _PipelineScheduleRuntime(stages, M, loss_fn=loss_fn)
        sched._load_csv(a.csv, format="compute_only")
    else:
        cls = getattr(schedules, a.schedule)
        sched = cls(stages[0] if S == world else stages, M, loss_fn=loss_fn)
    x, y = make_batch(M)
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
