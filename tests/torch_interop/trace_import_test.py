"""torch.profiler traces of torch's own runtime, imported: pipeplan plans run by
torch.distributed.pipelining (_load_csv) in P processes over Gloo under torch.profiler
(trace_job.py), then `pipeplan import --format torch-trace` with the plan, and the imported
timeline profiled and calibrated as a `pipeplan run` timeline would be. Torch's own
ScheduleZBVZeroBubble, ScheduleDualPipeV, Schedule1F1B and ScheduleGPipe run in the same job and
import without a plan: the plan is what they ran, torch's transfers included, and simulates
near the measured step.

    python trace_import_test.py --ranks P      (ctest runs it with P = 2 and P = 4)
"""

import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import interop_support as support

# (strategy, V). M = 2P for every case (dualpipe-v needs M >= 2P).
CASES = [("1f1b", 1), ("zb-h1", 1), ("zbv", 2), ("dualpipe-v", 2), ("interleaved-1f1b", 2)]
JOB_TIMEOUT_S = 400  # every case in one world of P processes, torch imports included
STEPS = 2            # profiled steps per case
# Torch's own classes: its runtime marks the V ones' actions; the single-stage ones (which
# torch 2.11 does not mark) are marked by pipeplan_profiler (profile_steps(schedule=...)).
TORCH_SCHEDULES = ["ScheduleZBVZeroBubble", "ScheduleDualPipeV", "Schedule1F1B", "ScheduleGPipe"]
# Simulated vs measured step of torch's own schedules, calibrated from the same traces. Not a
# budget (docs/benchmarks.md holds the accuracy, measured alone on the machine): a gross-model
# check. An import that charged torch's early-posted receives as waiting time simulates 33%
# over (measured -25% from simulated): refused below -20%. Other tests running beside this one
# slow the measured step, never the simulated one (up to +38% seen on the 2-core VM under
# ctest -j2), so above only a model off by 2x is refused.
GROSS_UNDER, GROSS_OVER = -0.20, 1.0
# Each rank's simulated peak bytes against the measured peak of the same traces (torch's
# runtime: gradients allocated at the first backward, what it holds to the step's end, the
# process's memory the CPU trace did not count): the bound.
MEMORY_ERROR = 0.10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TraceImport(unittest.TestCase):
    ranks = 2
    work = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-trace-import-")
        cls.work = cls.tmp.name
        csvs = []
        for strategy, stages_per_rank in CASES:
            plan = os.path.join(cls.work, f"{strategy}.pb")
            support.run_pipeplan(*support.plan_args(strategy, cls.ranks, stages_per_rank,
                                                    2 * cls.ranks, "--runtime", "torch"),
                                 "-o", plan)
            csv_path = os.path.join(cls.work, f"{strategy}.csv")
            support.run_pipeplan("export", plan, "--format", "torch-csv", "-o", csv_path)
            csvs.append(csv_path)
        job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_job.py")
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                   str(cls.ranks), "--master-addr", "127.0.0.1", "--master-port",
                   str(free_port()), job, *csvs, "--out", os.path.join(cls.work, "traces"),
                   "--steps", str(STEPS), "--microbatches", str(2 * cls.ranks)]
        for name in TORCH_SCHEDULES:
            command += ["--torch-schedule", name]
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=JOB_TIMEOUT_S, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"the traced job failed ({result.returncode}):\n"
                               f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def traces(self, strategy):
        directory = os.path.join(self.work, "traces", strategy)
        return [os.path.join(directory, f"rank{r}.json.gz") for r in range(self.ranks)]

    def run_import(self, *args):
        command = [support.pipeplan_binary(), "import", "--format", "torch-trace", *args]
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=support.COMMAND_TIMEOUT_S, check=False)

    def test_every_plan_imports_and_calibrates(self):
        for strategy, _ in CASES:
            with self.subTest(strategy=strategy):
                plan = os.path.join(self.work, f"{strategy}.pb")
                measured = os.path.join(self.work, f"{strategy}-measured.txtpb")
                # Reversed on purpose: the ranks come from the traces, not the order given.
                result = self.run_import(*reversed(self.traces(strategy)), "--plan", plan,
                                         "-o", measured)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn(f"imported {self.ranks} traces, timed by host ranges", result.stdout)
                for r in range(self.ranks):
                    self.assertIn(f"rank {r}: {self.traces(strategy)[r]}", result.stdout)
                self.assertEqual(result.stdout.count(" ms "), STEPS, result.stdout)
                profile = os.path.join(self.work, f"{strategy}-profile.json")
                support.run_pipeplan("profile", measured, "-o", profile)
                with open(profile) as f:
                    stages = json.load(f)["stages"]
                self.assertEqual(len(stages), self.ranks * dict(CASES)[strategy])
                for stage in stages:
                    self.assertGreater(stage["forward"]["median"], 0.0)
                support.run_pipeplan("calibrate", profile, "-o",
                                     os.path.join(self.work, f"{strategy}-costs.json"))
                # Memory came along, in bytes: the timeline says so.
                with open(measured) as f:
                    text = f.read()
                self.assertEqual(text.count("memory_unit: MEMORY_UNIT_BYTES"), self.ranks)
                self.assertEqual(text.count("clock: PROFILER_HOST"), self.ranks)

    def peak_memory_errors(self, strategy):
        """Imports, profiles and calibrates the strategy's traces, simulates its plan with the
        costs and returns diff's peak memory error of each rank (measured relative to
        simulated, as a fraction)."""
        plan = os.path.join(self.work, f"{strategy}.pb")
        measured = os.path.join(self.work, f"{strategy}-memory.pb")
        profile = os.path.join(self.work, f"{strategy}-memory.json")
        costs = os.path.join(self.work, f"{strategy}-memory-costs.json")
        simulated = os.path.join(self.work, f"{strategy}-memory-simulated.pb")
        result = self.run_import(*self.traces(strategy), "--plan", plan, "-o", measured,
                                 "--profile-output", profile)
        self.assertEqual(result.returncode, 0, result.stderr)
        support.run_pipeplan("calibrate", profile, "-o", costs)
        support.run_pipeplan("simulate", plan, "--costs", costs, "--timeline", simulated)
        errors = support.diff_errors(simulated, measured)[1]
        self.assertEqual(len(errors), self.ranks)
        return errors

    def test_peak_memory_of_torch_runtime_is_predicted(self):
        for strategy, _ in CASES:
            with self.subTest(strategy=strategy):
                errors = self.peak_memory_errors(strategy)
                print(f"{strategy} P={self.ranks}: peak memory measured "
                      + ", ".join(f"{e:+.1%}" for e in errors) + " from simulated", flush=True)
                for rank, error in enumerate(errors):
                    self.assertLessEqual(abs(error), MEMORY_ERROR, f"rank {rank}")

    def test_a_plan_the_job_did_not_run_is_refused_naming_rank_and_position(self):
        other = os.path.join(self.work, "1f1b.pb")
        result = self.run_import(*self.traces("zb-h1"), "--plan", other, "-o",
                                 os.path.join(self.work, "never.pb"))
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("(rank 0), step ", result.stderr)
        self.assertIn("but the plan has", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, "never.pb")))

    def executed_tokens(self, trace):
        """A rank's actions of its first profiled step, as torch's runtime named them, without
        its bookkeeping (REDUCE_GRAD, UNSHARD, RESHARD)."""
        with gzip.open(trace, "rt") as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        events.sort(key=lambda e: e["ts"])
        step = next(e for e in events if e["name"].startswith("ProfilerStep#"))
        return [e["name"][3:] for e in events
                if e["name"].startswith("PP:") and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]
                and not e["name"].endswith(("REDUCE_GRAD", "UNSHARD", "RESHARD"))]

    def test_torch_schedules_import_without_a_plan_as_they_ran(self):
        for name in TORCH_SCHEDULES:
            with self.subTest(schedule=name):
                measured = os.path.join(self.work, f"{name}-check.pb")
                plan = os.path.join(self.work, f"{name}-check-ran.pb")
                result = self.run_import(*self.traces(name), "-o", measured, "--plan-output", plan)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("no --plan", result.stderr)
                # Torch's transfers stay where torch's runtime put them.
                csv_path = os.path.join(self.work, f"{name}-ran.csv")
                support.run_pipeplan("export", plan, "--format", "torch-csv-comms", "-o", csv_path)
                with open(csv_path) as f:
                    rows = [[c for c in line.strip().split(",") if not c.endswith("REDUCE_GRAD")]
                            for line in f if line.strip()]
                self.assertEqual(rows, [self.executed_tokens(t) for t in self.traces(name)])
                error, memory = support.simulated_errors(self.traces(name), self.work, name)
                print(f"{name} P={self.ranks}: measured step {error:+.1%}, peak memory "
                      + ", ".join(f"{e:+.1%}" for e in memory) + " from simulated", flush=True)
                if self.ranks == 2:
                    self.assertGreater(error, GROSS_UNDER)
                    self.assertLess(error, GROSS_OVER)
                # Torch's own classes too: Schedule1F1B computes the loss after the F its stage
                # marks, which the import counts as the F's.
                self.assertEqual(len(memory), self.ranks)
                for rank, e in enumerate(memory):
                    self.assertLessEqual(abs(e), MEMORY_ERROR, f"rank {rank}")

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    args, rest = parser.parse_known_args()
    support.require_torch()
    TraceImport.ranks = args.ranks
    unittest.main(argv=[sys.argv[0], *rest])


if __name__ == "__main__":
    main()
