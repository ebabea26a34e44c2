"""pipeplan-torch against torch's own runtime on one device: the same plan (interleaved-1f1b,
P = 1, V = 4: one rank holding four stages, M = 8, planned for torch), the same TorchScript
stages (examples/make_stage_modules.py), the same data shapes, MSE loss, SGD.

    python bench/runtime_side_by_side.py --pipeplan BUILD/cli/pipeplan \
        --pipeplan-torch BUILD/torch_ext/pipeplan-torch [--device cpu|cuda] [--hidden 256]
        [--sequence 128] [--microbatch-size 4] [--steps 20] [--rounds 3]

Three ways to run one training step, in turn, --rounds times (against drift):
- bare: the plan's compute actions in its order as a plain autograd loop (no runtime: each
  stage's input a detached leaf, each B from the next stage's input gradient), the floor;
- torch: `_PipelineScheduleRuntime` with the plan's torch-csv-comms loaded (`_load_csv`);
- pipeplan-torch: `pipeplan-torch run` on the same stages (--stage-modules), its
  "each step adds" figure (--no-step-barrier: one step's wall time, start to next start).
Each figure is the median step's wall time (optimizer included; a GPU synchronised at the
step's end); per action = (runtime's step - bare step) / the plan's compute actions. Prints
one table; needs the torch venv (scripts/setup_torch.sh) and a built pipeplan.
"""

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
STAGES, MICROBATCHES = 4, 8
TOKEN = re.compile(r"^(\d+)([FB])(\d+)$")


def run_checked(command):
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def compute_order(csv_path):
    """The rank's compute actions (stage, 'F' or 'B', microbatch), in order."""
    with open(csv_path, newline="") as f:
        row = next(csv.reader(f))
    return [(int(m[1]), m[2], int(m[3])) for m in map(TOKEN.match, row) if m]


class Step:
    """One training step's data and timing on a device."""

    def __init__(self, args, device):
        self.device = device
        generator = torch.Generator().manual_seed(0)
        shape = (MICROBATCHES * args.microbatch_size, args.sequence, args.hidden)
        self.inputs = torch.randn(*shape, generator=generator).to(device)
        self.targets = torch.randn(*shape, generator=generator).to(device)

    def time(self, step, steps, warmup):
        """Median wall time of `step()` in ms over `steps` after `warmup`."""
        times = []
        for index in range(warmup + steps):
            start = time.perf_counter()
            step()
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            if index >= warmup:
                times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)


def bare_step(modules, order, data, optimizer):
    """The plan's compute order as a plain autograd loop."""
    inputs = data.inputs.chunk(MICROBATCHES)
    targets = data.targets.chunk(MICROBATCHES)

    def step():
        optimizer.zero_grad(set_to_none=True)
        leaf, out, grad = {}, {}, {}
        for stage, kind, mb in order:
            if kind == "F":
                x = inputs[mb] if stage == 0 else out[stage - 1, mb].detach().requires_grad_()
                leaf[stage, mb] = x
                out[stage, mb] = modules[stage](x)
            elif stage == STAGES - 1:
                loss = torch.nn.functional.mse_loss(out[stage, mb], targets[mb]) / MICROBATCHES
                loss.backward()
                grad[stage - 1, mb] = leaf[stage, mb].grad
            else:
                out[stage, mb].backward(grad.pop((stage, mb)))
                if stage > 0:
                    grad[stage - 1, mb] = leaf[stage, mb].grad
        optimizer.step()
    return step


class OneRankStage(PipelineStage):
    """All four stages are on the one rank: torch's warm-up would post sends to itself (which
    Gloo refuses); it only opens connections, so there is none."""

    def _get_init_p2p_neighbors_ops(self):
        return []


def torch_step(modules, csv_path, data, optimizer):
    stages = [OneRankStage(module, s, STAGES, data.device) for s, module in enumerate(modules)]
    schedule = _PipelineScheduleRuntime(stages, MICROBATCHES,
                                        loss_fn=torch.nn.functional.mse_loss)
    schedule._load_csv(csv_path, format="compute_comms")

    def step():
        optimizer.zero_grad(set_to_none=True)
        schedule.step(data.inputs, target=data.targets)
        optimizer.step()
    return step


def pipeplan_torch_step_ms(args, plan, stage_dir):
    transport = (["--transport", "nccl", "--local-ranks", "1"] if args.device == "cuda"
                 else ["--transport", "inproc"])
    out = run_checked([args.pipeplan_torch, "run", plan, *transport, "--stage-modules", stage_dir,
                       "--hidden", str(args.hidden), "--sequence", str(args.sequence),
                       "--microbatch-size", str(args.microbatch_size), "--steps", str(args.steps),
                       "--warmup", "3", "--threads", "1", "--no-memory", "--no-step-barrier"])
    match = re.search(r"each step adds a median ([0-9.]+) ms", out)
    if not match:
        sys.exit(f"pipeplan-torch printed no step figure:\n{out}")
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeplan", required=True)
    parser.add_argument("--pipeplan-torch", required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--stage-maker", default=os.path.join(REPO, "examples",
                                                              "make_stage_modules.py"),
                        help="the script writing the TorchScript stages")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--microbatch-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    with tempfile.TemporaryDirectory(prefix="pipeplan-side-by-side-") as work:
        stage_dir, plan = os.path.join(work, "stages"), os.path.join(work, "plan.pb")
        csv_path = os.path.join(work, "plan.csv")
        run_checked([sys.executable, args.stage_maker, "--stages", str(STAGES),
                     "--hidden", str(args.hidden), stage_dir])
        run_checked([args.pipeplan, "plan", "--strategy", "interleaved-1f1b", "--ranks", "1",
                     "--stages-per-rank", str(STAGES), "--microbatches", str(MICROBATCHES),
                     "--runtime", "torch", "-o", plan])
        run_checked([args.pipeplan, "export", plan, "--format", "torch-csv-comms", "-o", csv_path])
        order = compute_order(csv_path)
        store = dist.HashStore()
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo", store=store,
                                rank=0, world_size=1)
        modules = [torch.jit.load(os.path.join(stage_dir, f"stage-{s}.pt")).to(device)
                   for s in range(STAGES)]
        optimizer = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=1e-3)
        data = Step(args, device)
        steps = {"bare": bare_step(modules, order, data, optimizer),
                 "torch": torch_step(modules, csv_path, data, optimizer)}
        runs = {name: [] for name in ("bare", "torch", "pipeplan-torch")}
        for _ in range(args.rounds):
            for name, step in steps.items():
                runs[name].append(data.time(step, args.steps, warmup=3))
            runs["pipeplan-torch"].append(pipeplan_torch_step_ms(args, plan, stage_dir))
        dist.destroy_process_group()
    bare = statistics.median(runs["bare"])
    print(f"interleaved-1f1b P=1 V={STAGES} M={MICROBATCHES} on {args.device}: "
          f"{len(order)} compute actions a step; stages hidden {args.hidden}, "
          f"{args.microbatch_size} x {args.sequence} tokens a microbatch; "
          f"median of {args.rounds} rounds x {args.steps} steps")
    print(f"{'runtime':16s} {'step ms':>9s} {'over bare':>10s} {'per action':>11s}  rounds")
    for name, ms in runs.items():
        step = statistics.median(ms)
        over = (step - bare) / len(order) * 1e3
        print(f"{name:16s} {step:9.2f} {step / bare - 1:+10.1%} {over:9.1f} us  "
              f"{', '.join(f'{m:.2f}' for m in ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
