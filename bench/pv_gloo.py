"""Post-validation against the synchronous global check, measured over Gloo: zbv at P=2, M=8
on pipeplan-torch's built-in model (hidden 128, sequence 32, 2 layers per stage, one intra-op
thread per rank), two processes on this machine, steps without a barrier
(--no-step-barrier). Both runs clip to a global norm too large to clip (--clip-grad-norm
1e9), so every step needs the global check and none is redone: the synchronous plan waits for
every rank's gradient state at each step's end; the plan made with --post-validation updates
speculatively and goes on. Per run the figure is pipeplan-torch's median of what each step
adds to the run; printed per plan: the median over the runs and their spread (max - min), and
the difference.

    python bench/pv_gloo.py [--runs 5] [--steps 20] [--build DIR]

DIR is the build directory (default: scripts/build_dir.sh's); it needs cli/pipeplan and
torch_ext/pipeplan-torch.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = ["--hidden", "128", "--sequence", "32", "--layers-per-stage", "2", "--threads", "1"]
ADDED = re.compile(r"each step adds a median ([0-9.]+) ms")


def build_dir():
    return subprocess.run(["bash", os.path.join(REPO, "scripts", "build_dir.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()


def plan(pipeplan, path, post_validation):
    args = [pipeplan, "plan", "--strategy", "zbv", "--ranks", "2", "--microbatches", "8", "-o",
            path]
    if post_validation:
        args.append("--post-validation")
    subprocess.run(args, check=True, capture_output=True)


def one_run(torch_tool, path, steps):
    out = subprocess.run([torch_tool, "run", path, "--local-ranks", "2", "--steps", str(steps),
                          "--warmup", "2", "--no-step-barrier", "--clip-grad-norm", "1e9"] + MODEL,
                         check=True, capture_output=True, text=True).stdout
    found = ADDED.search(out)
    if not found:
        sys.exit(f"pv_gloo: no 'each step adds' line in:\n{out}")
    return float(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--build", default=None)
    args = parser.parse_args()
    build = args.build or build_dir()
    pipeplan = os.path.join(build, "cli", "pipeplan")
    torch_tool = os.path.join(build, "torch_ext", "pipeplan-torch")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"synchronous": os.path.join(tmp, "sync.pb"),
                 "post-validation": os.path.join(tmp, "pv.pb")}
        plan(pipeplan, paths["synchronous"], False)
        plan(pipeplan, paths["post-validation"], True)
        runs = {name: [] for name in paths}
        for _ in range(args.runs):  # alternate, so that a slow spell hits both
            for name, path in paths.items():
                runs[name].append(one_run(torch_tool, path, args.steps))
    medians = {}
    for name, values in runs.items():
        medians[name] = statistics.median(values)
        print(f"{name:16s} median {medians[name]:7.2f} ms a step over {args.runs} runs of "
              f"{args.steps} steps (spread {max(values) - min(values):.2f} ms: "
              + ", ".join(f"{v:.2f}" for v in values) + ")")
    saved = medians["synchronous"] - medians["post-validation"]
    print(f"post-validation saves {saved:.2f} ms a step "
          f"({100 * saved / medians['synchronous']:.1f}% of the synchronous step)")


if __name__ == "__main__":
    main()
