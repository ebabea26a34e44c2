#!/usr/bin/env python3
"""pipeplan.plan + pipeplan.simulate from Python against the C++ figure, on this machine now.

Budget (docs/python.md): interleaved-1f1b at P=32, V=2, M=256 (F=1, B=2, I=W=1, the request
plan_pipeline_bench's BM_Budget plans) within 1.5x of the C++ pipeline's time. Both are
measured here, alternating, so that the machine's load affects both alike: the C++ figure is
plan_pipeline_bench's mean per iteration, the Python figure the median of `--runs` calls.

  python3 bench/python_plan.py --bench BUILD/bench/plan_pipeline_bench [--runs 50]
  (PYTHONPATH=BUILD/python, or the package installed)
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import pipeplan

BUDGET_RATIO = 1.5


def python_ms(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        plan = pipeplan.plan("interleaved-1f1b", ranks=32, stages_per_rank=2, microbatches=256,
                             forward=1, backward=2, backward_input=1, backward_weight=1)
        makespan = pipeplan.simulate(plan).makespan
        times.append((time.perf_counter() - start) * 1e3)
        assert makespan > 0
    return times


def cpp_ms(bench: str) -> float:
    out = subprocess.run(
        [bench, "--benchmark_filter=BM_Budget", "--benchmark_min_time=1",
         "--benchmark_format=json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["benchmarks"][0]["ms"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="the plan_pipeline_bench binary")
    parser.add_argument("--runs", type=int, default=50, help="Python calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    args = parser.parse_args()
    python_ms(3)  # warm up: first-call allocations
    cpp, py = [], []
    for _ in range(args.rounds):
        cpp.append(cpp_ms(args.bench))
        py.append(statistics.median(python_ms(args.runs)))
    ratio = statistics.median(py) / statistics.median(cpp)
    verdict = "within budget" if ratio <= BUDGET_RATIO else "OVER BUDGET"
    print(f"interleaved-1f1b P=32 V=2 M=256, {args.rounds} rounds")
    print(f"  C++ plan+simulate      {min(cpp):.2f}-{max(cpp):.2f} ms (median {statistics.median(cpp):.2f})")
    print(f"  Python plan+simulate   {min(py):.2f}-{max(py):.2f} ms (median {statistics.median(py):.2f})")
    print(f"  ratio {ratio:.2f}x, budget {BUDGET_RATIO}x: {verdict}")
    return 0 if ratio <= BUDGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
