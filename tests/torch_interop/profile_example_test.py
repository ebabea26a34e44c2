"""examples/profile_torch_job.py end to end, so the "profile your own model" path cannot rot:
2 local Gloo processes train the example's GPT-style decoder with pipeplan's zbv plan and with
torch's ScheduleZBVZeroBubble under torch.profiler; both jobs' traces import (with and without
the plan), calibrate, simulate and diff, and the calibrated costs re-plan.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import interop_support as support

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "profile_torch_job.py")
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
            for job in ("pipeplan-zbv", "torch-ZBVZeroBubble"):
                self.assertIn(f"{job}: 4 steps, mean loss", result.stdout)
                for produced in ("measured.pb", "costs.txtpb", "simulated.pb", "diff.html"):
                    self.assertTrue(os.path.getsize(os.path.join(out, f"{job}-{produced}")) > 0)
            # Torch's own schedule was imported without a plan: the plan is what it ran.
            self.assertIn("no --plan", result.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "torch-ZBVZeroBubble-plan.pb")))
            self.assertEqual(result.stdout.count("step time   "), 2, result.stdout)
            self.assertTrue(os.path.getsize(os.path.join(out, "replanned.pb")) > 0)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
