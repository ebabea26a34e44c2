"""Profile a torch.distributed.pipelining job for `pipeplan import --format torch-trace`.

Put this directory on sys.path (or copy the file) and wrap the training loop:

    from pipeplan_profiler import profile_steps

    with profile_steps("traces", warmup=1, active=3) as next_step:
        for batch in loader:
            schedule.step(...)
            next_step()

Every rank writes traces/rank<r>.json.gz (torch.profiler with record_shapes off,
profile_memory on, no stacks; CUDA activity too when CUDA is available) covering the `active`
steps after `warmup` ones, and rank 0 prints the pipeplan command that imports them. Torch's
schedule runtime marks every action "PP:<action>", which is what pipeplan reads; the steps are
torch.profiler's ProfilerStep ranges. Only torch and the standard library are used.

Python's garbage collector runs between steps, not inside them (as torchtitan's gc_freq does):
an automatic collection lands inside whichever action allocates at that moment and stalls it
for tens of milliseconds with no operator running, which the measured step then holds and no
cost model can (on a 2-core VM, torch's ScheduleZBVZeroBubble measured 15-43% over its
simulated step with it, 5-8% without). `collect_garbage=False` leaves the collector alone.
"""

import contextlib
import gc
import os

import torch


def _rank():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def import_command(directory, world_size, plan=None):
    """The `pipeplan import` command for the traces written under `directory`."""
    traces = " ".join(os.path.join(directory, f"rank{r}.json.gz") for r in range(world_size))
    # Without a plan, the order the job ran becomes the plan: --plan-output keeps it, for
    # `simulate` and `diff` of the run as it was.
    plan_flag = f" --plan {plan}" if plan else " --plan-output ran.pb"
    return f"pipeplan import --format torch-trace {traces}{plan_flag} -o measured.pb"


@contextlib.contextmanager
def profile_steps(directory, warmup=1, active=3, plan=None, quiet=False, collect_garbage=True):
    """Profiles `active` steps after `warmup` ones; yields the function to call after each step.

    `plan`: the pipeplan plan the job runs (its CSV export loaded with _load_csv), only for the
    printed command. The trace is written when the last active step ends. `collect_garbage`:
    automatic garbage collection off inside the block, a collection at each step's end instead.
    """
    if warmup < 0 or active < 1:
        raise ValueError(f"need warmup >= 0 and active >= 1, got {warmup} and {active}")
    rank, world_size = _rank()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"rank{rank}.json.gz")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(
            activities=activities, record_shapes=False, profile_memory=True, with_stack=False,
            schedule=torch.profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
            on_trace_ready=lambda prof: prof.export_chrome_trace(path)) as prof:
        if not collect_garbage:
            yield prof.step
        else:
            was_enabled = gc.isenabled()
            gc.disable()

            def next_step():
                gc.collect(1)
                prof.step()

            try:
                yield next_step
            finally:
                if was_enabled:
                    gc.enable()
    if rank == 0 and not quiet:
        print(f"pipeplan_profiler: traces in {directory}; import them with:\n  "
              f"{import_command(directory, world_size, plan)}", flush=True)
