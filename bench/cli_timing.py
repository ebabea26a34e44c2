#!/usr/bin/env python3
"""Wall time of the planner's whole-catalogue commands (auto, compare, compare --auto --html,
demo) through the pipeplan command, for one build or two side by side (before/after a change).
Runs alternate between the builds, RUNS times each (default 15); prints each command's median
in ms and the change.

    python3 bench/cli_timing.py BUILD/cli/pipeplan [OTHER/cli/pipeplan] [--runs N]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(REPO, "examples", "h200_zbv_costs.json")
PAPER = ["--ranks", "8", "--microbatches", "24", "--forward", "18522", "--backward-input",
         "18086", "--backward-weight", "9337", "--comm", "601"]
LARGE = ["--ranks", "16", "--microbatches", "128", *PAPER[4:]]
COMMANDS = {
    "plan auto (paper, P=8 M=24)": ["plan", "--strategy", "auto", *PAPER, "-o", "auto.pb"],
    "plan auto (paper costs, P=16 M=128)": ["plan", "--strategy", "auto", *LARGE, "-o", "a.pb"],
    "compare --auto (paper costs, P=16 M=128)": ["compare", *LARGE, "--auto"],
    "plan auto (h200 costs, P=8 M=16, 2000MiB)": [
        "plan", "--strategy", "auto", "--costs", H200, "--ranks", "8", "--microbatches", "16",
        "--memory-limit", "2000MiB", "-o", "auto.pb"],
    "compare --auto (h200 costs, P=8 M=16, 2000MiB)": [
        "compare", "--auto", "--costs", H200, "--ranks", "8", "--microbatches", "16",
        "--memory-limit", "2000MiB"],
    "compare (paper)": ["compare", *PAPER],
    "compare --auto --html (paper)": ["compare", *PAPER, "--auto", "--html", "r.html"],
    "demo": ["demo", "--output-dir", "demo"],
}


def once(binary, args, cwd):
    start = time.perf_counter()
    subprocess.run([binary, *args], cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        for name, command in COMMANDS.items():
            times = {b: [] for b in args.binaries}
            for _ in range(args.runs):
                for binary in args.binaries:
                    times[binary].append(once(binary, command, cwd))
            medians = [statistics.median(times[b]) for b in args.binaries]
            line = f"{name:45s}" + "".join(f" {m:9.1f} ms" for m in medians)
            if len(medians) == 2:
                line += f"  {medians[1] / medians[0] - 1:+.1%}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
