"""examples/torch_schedule_from_pipeplan.py end to end, so the example cannot rot: 2 local
processes over Gloo train 3 steps with pipeplan's zbv schedule in torch's compute+comms
format; the example itself fails unless the loss goes down. (Both formats and more strategies
run in torch's runtime in torch_runtime_test.py.)
"""

import os
import subprocess
import sys
import unittest

import interop_support as support

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "torch_schedule_from_pipeplan.py")
RUN_TIMEOUT_S = 240  # torch imported by the launcher and 2 workers on 2 shared cores


class ExampleTest(unittest.TestCase):

    def run_example(self, *args):
        command = [sys.executable, EXAMPLE, "--ops-library",
                   support.env_path("PIPEPLAN_TORCH_OPS_LIBRARY"), "--ranks", "2", "--steps",
                   "3", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                check=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result.stdout

    def test_zbv_with_pipeplans_transfers(self):
        out = self.run_example("--strategy", "zbv", "--format", "torch-csv-comms")
        self.assertIn("pipeplan: zbv P=2 V=2 M=4: simulated makespan", out)
        self.assertIn("trained 3 steps with pipeplan's zbv schedule", out)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
