"""torch.profiler traces of torch's own runtime, imported: pipeplan plans run by
torch.distributed.pipelining (_load_csv) in P processes over Gloo under torch.profiler
(trace_job.py), then `pipeplan import --format torch-trace` with the plan, and the imported
timeline profiled and calibrated as a `pipeplan run` timeline would be.

    python trace_import_test.py --ranks P      (ctest runs it with P = 2 and P = 4)
"""

import argparse
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
                                                    2 * cls.ranks), "-o", plan)
            csv_path = os.path.join(cls.work, f"{strategy}.csv")
            support.run_pipeplan("export", plan, "--format", "torch-csv", "-o", csv_path)
            csvs.append(csv_path)
        job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace_job.py")
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                   str(cls.ranks), "--master-addr", "127.0.0.1", "--master-port",
                   str(free_port()), job, *csvs, "--out", os.path.join(cls.work, "traces"),
                   "--steps", str(STEPS)]
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

    def test_a_plan_the_job_did_not_run_is_refused_naming_rank_and_position(self):
        other = os.path.join(self.work, "1f1b.pb")
        result = self.run_import(*self.traces("zb-h1"), "--plan", other, "-o",
                                 os.path.join(self.work, "never.pb"))
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("(rank 0), step ", result.stderr)
        self.assertIn("but the plan has", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work, "never.pb")))

    def test_without_a_plan_the_executed_order_is_the_plan(self):
        measured = os.path.join(self.work, "zbv-noplan.pb")
        result = self.run_import(*self.traces("zbv"), "-o", measured)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("no --plan", result.stderr)
        support.run_pipeplan("profile", measured, "-o", os.path.join(self.work, "np.json"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    args, rest = parser.parse_known_args()
    support.require_torch()
    TraceImport.ranks = args.ranks
    unittest.main(argv=[sys.argv[0], *rest])


if __name__ == "__main__":
    main()
