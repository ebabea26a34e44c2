"""examples/profile_torch_job.py end to end, so the "profile your own model" path cannot rot:
2 local Gloo processes train the example's GPT-style decoder with pipeplan's zbv plan and with
torch's ScheduleZBVZeroBubble under torch.profiler; both jobs' traces import (with and without
the plan), calibrate, simulate and diff, and the calibrated costs re-plan. The bytes each F
keeps, as profiled from the trace's [memory] events, match what autograd saved for the
stage's backward (counted by the example from the saved tensors' storages) within 10%.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import interop_support as support

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "profile_torch_job.py")
ACTIVATION_TOLERANCE = 0.10
RUN_TIMEOUT_S = 400  # torch imported by 2 workers on 2 shared cores, 2 jobs of 4 steps


class ProfileExampleTest(unittest.TestCase):

    def test_both_jobs_import_calibrate_and_replan(self):
        with tempfile.TemporaryDirectory(prefix="pipeplan-profile-example-") as out:
            command = [sys.executable, EXAMPLE, "--pipeplan", support.pipeplan_binary(),
                       "--ranks", "2", "--steps", "3", "--out", out]
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=RUN_TIMEOUT_S, check=False)
            log = result.stdout + result.stderr
            self.assertEqual(result.returncode, 0, log[-4000:])
            self.assertIn("profile_torch_job: done", result.stdout)
            # Same model, data and seeds: both schedules train the same losses, and they fall.
            losses = re.findall(r"(\S+): 4 steps, mean loss (\S+) -> (\S+)", result.stdout)
            self.assertEqual([job for job, _, _ in losses], ["pipeplan-zbv", "torch-ZBVZeroBubble"])
            self.assertEqual(losses[0][1:], losses[1][1:])
            self.assertLess(float(losses[0][2]), float(losses[0][1]))
            for job in ("pipeplan-zbv", "torch-ZBVZeroBubble"):
                for produced in ("measured.pb", "costs.txtpb", "simulated.pb", "diff.html"):
                    self.assertTrue(os.path.getsize(os.path.join(out, f"{job}-{produced}")) > 0)
            # Torch's own schedule was imported without a plan: the plan is what it ran.
            self.assertIn("no --plan", result.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "torch-ZBVZeroBubble-plan.pb")))
            # Both diffs' tables (the header's spacing follows the figures' widths).
            self.assertEqual(len(re.findall(r"^step time +simulated +measured +error$",
                                            result.stdout, re.M)), 2, result.stdout)
            self.assertTrue(os.path.getsize(os.path.join(out, "replanned.pb")) > 0)
            activations = re.findall(r"stage (\d+): F keeps (\d+) B measured, (\d+) B saved",
                                     result.stdout)
            self.assertEqual([int(s) for s, _, _ in activations], [0, 1, 2, 3], result.stdout)
            for stage, measured, saved in activations:
                with self.subTest(stage=stage):
                    self.assertGreater(int(saved), 0)
                    self.assertLessEqual(abs(int(measured) - int(saved)),
                                         ACTIVATION_TOLERANCE * int(saved))


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
