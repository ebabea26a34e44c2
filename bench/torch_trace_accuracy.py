"""How close the simulated step of a job that ran torch's own schedule comes to its measured
step, when pipeplan knows the job only from its torch.profiler traces.

    python bench/torch_trace_accuracy.py --pipeplan build/cli/pipeplan [--ranks 2] [--runs 3]

Each run launches tests/torch_interop/trace_job.py with torchrun (P local Gloo processes, the
test model: per stage LayerNorm + Linear(256, 1024) + GELU + Linear(1024, 256), 64 rows per
microbatch, M = 2P, 3 profiled steps after a warm-up one), which trains torch's
ScheduleZBVZeroBubble and ScheduleDualPipeV under python/pipeplan_profiler.py. For each job:
`import --format torch-trace` without a plan (the plan is what torch ran), `profile`,
`calibrate`, `simulate` the plan with the calibrated costs, and `diff` against the measured
median step. Prints every run's error (measured relative to simulated) and the median of the
runs next to the budget: within 15% on 2 processes.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile

INTEROP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch_interop")
sys.path.insert(0, INTEROP)
import interop_support as support  # noqa: E402  (the test's own import -> diff steps)

SCHEDULES = ["ScheduleZBVZeroBubble", "ScheduleDualPipeV"]
BUDGET = 0.15
JOB = os.path.join(INTEROP, "trace_job.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(ranks):
    with tempfile.TemporaryDirectory(prefix="pipeplan-trace-accuracy-") as work:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                   "--master-addr", "127.0.0.1", "--master-port", str(free_port()), JOB,
                   "--out", os.path.join(work, "traces"), "--steps", "3", "--microbatches",
                   str(2 * ranks)]
        for name in SCHEDULES:
            command += ["--torch-schedule", name]
        job = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
        if job.returncode != 0:
            sys.exit(f"the traced job failed:\n{job.stdout[-2000:]}\n{job.stderr[-2000:]}")
        return {name: support.simulated_errors(
            [os.path.join(work, "traces", name, f"rank{r}.json.gz") for r in range(ranks)],
            work, name)[0] for name in SCHEDULES}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeplan", required=True, help="the pipeplan binary")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ["PIPEPLAN_CLI"] = os.path.abspath(args.pipeplan)
    errors = {name: [] for name in SCHEDULES}
    for run in range(args.runs):
        for name, error in one_run(args.ranks).items():
            errors[name].append(error)
        print(f"run {run + 1} of {args.runs} done", file=sys.stderr, flush=True)
    print(f"| torch schedule, P = {args.ranks} | runs | median | budget | |")
    print("|---|---|---|---|---|")
    for name, values in errors.items():
        median = statistics.median(values)
        runs = ", ".join(f"{v:+.1%}" for v in values)
        verdict = "within" if abs(median) <= BUDGET else "**over**"
        print(f"| {name} | {runs} | **{median:+.1%}** | {BUDGET:.0%} | {verdict} |")


if __name__ == "__main__":
    main()
