"""pipeplan-torch under torchrun (`torchrun --no-python --nproc-per-node 2 pipeplan-torch run
PLAN`, here as `python -m torch.distributed.run`): the step runs, and nothing is printed as an
error (torchrun's agent hosts the rendezvous store, so no rank tries to bind it again)."""

import os
import subprocess
import sys
import tempfile
import unittest

import interop_support as support


class TorchrunLaunchTest(unittest.TestCase):

    def test_a_plan_runs_under_torchrun_without_error_lines(self):
        with tempfile.TemporaryDirectory(prefix="pipeplan-torchrun-") as tmp:
            plan = os.path.join(tmp, "plan.pb")
            support.run_pipeplan("plan", "--strategy", "1f1b", "--ranks", "2",
                                 "--microbatches", "4", "-o", plan)
            command = [sys.executable, "-m", "torch.distributed.run", "--no-python",
                       "--standalone", "--nproc-per-node", "2",
                       support.env_path("PIPEPLAN_TORCH_BINARY"), "run", plan, "--steps", "1",
                       "--warmup", "0"]
            result = subprocess.run(command, capture_output=True, text=True, timeout=240,
                                    check=False)
            output = result.stdout + result.stderr
            self.assertEqual(result.returncode, 0, output)
            self.assertIn("median step", output)
            self.assertNotIn("not under torchrun", output)
            errors = [line for line in output.splitlines()
                      if line.startswith("[E") or " error" in line.lower()]
            self.assertEqual(errors, [], output)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
