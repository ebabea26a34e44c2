"""The Python entry point: torch.ops.load_library(libpipeplan_torch_ops.so) registers
torch.ops.pipeplan.plan, whose answer must equal, for the same request, what the CLI gives:
the rows of `pipeplan plan ... -o P` + `pipeplan export P --format F`, the line of
`pipeplan simulate P --json` and export's `note:` lines. Also: errors arrive as RuntimeError
with the CLI's message.
"""

import os
import sys
import tempfile
import unittest

import interop_support as support

# A cost file with per-stage costs (2 ranks x 1 stage) and a boundary latency.
COSTS_TEXTPROTO = """\
stages { forward: 1.5 backward_input: 1.25 backward_weight: 0.5 }
stages { forward: 2 backward_input: 1 backward_weight: 1 }
boundaries { latency: 0.25 }
"""

# keyword arguments of the op -> `pipeplan plan` flag.
FLAGS = {
    "stages_per_rank": "--stages-per-rank",
    "microbatch_group_size": "--microbatch-group-size",
    "forward": "--forward",
    "backward": "--backward",
    "backward_input": "--backward-input",
    "backward_weight": "--backward-weight",
    "overlap": "--overlap",
    "comm": "--comm",
    "receive_overhead": "--receive-overhead",
    "costs_file": "--costs",
    "memory_limit": "--memory-limit",
    "runtime": "--runtime",
}


def requests(costs_file):
    """(positional arguments, keyword arguments) of the op, a spread of strategies and flags."""
    return [
        (("1f1b", 4, 8), {}),
        (("zbv", 4, 8), {"forward": 1.5, "backward_input": 1.0, "backward_weight": 0.75,
                         "comm": 0.1, "format": "torch-csv-comms"}),
        (("dualpipe-v", 4, 10), {"overlap": 2.5}),
        (("interleaved-1f1b", 2, 6), {"stages_per_rank": 3, "microbatch_group_size": 3,
                                      "backward": 3.0}),
        (("zbv", 4, 8), {"post_validation": True, "format": "torch-csv-comms", "runtime": "any"}),
        (("auto", 4, 8), {"memory_limit": 4.0}),
        (("zb-2p", 2, 6), {"costs_file": costs_file}),
        (("interleaved-1f1b", 4, 8), {"comm": 0.25, "receive_overhead": 0.5}),
    ]


def cli_flags(args, kwargs):
    strategy, ranks, microbatches = args
    # The op plans for torch's runtime unless told otherwise; the CLI is told.
    flags = ["--strategy", strategy, "--ranks", ranks, "--microbatches", microbatches,
             "--runtime", kwargs.get("runtime", "torch")]
    for name, value in kwargs.items():
        if name in FLAGS:
            if name != "runtime":
                flags += [FLAGS[name], repr(value) if isinstance(value, float) else value]
    if kwargs.get("post_validation"):
        flags.append("--post-validation")
    return flags


class TorchOpsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import torch
        torch.ops.load_library(support.env_path("PIPEPLAN_TORCH_OPS_LIBRARY"))
        cls.plan = torch.ops.pipeplan.plan
        cls.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-torch-ops-")
        cls.costs_file = os.path.join(cls.tmp.name, "costs.txtpb")
        with open(cls.costs_file, "w") as f:
            f.write(COSTS_TEXTPROTO)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_answers_like_plan_export_and_simulate(self):
        plan_file = os.path.join(self.tmp.name, "plan.pb")
        for args, kwargs in requests(self.costs_file):
            with self.subTest(f"{args} {kwargs}"):
                actions, metrics_json, notes = self.plan(*args, **kwargs)

                _, plan_stderr = support.run_pipeplan("plan", *cli_flags(args, kwargs), "-o",
                                                      plan_file)
                csv_text, export_stderr = support.run_pipeplan(
                    "export", plan_file, "--format", kwargs.get("format", "torch-csv"))
                simulated, _ = support.run_pipeplan("simulate", plan_file, "--json")

                self.assertEqual(actions, support.csv_rows(csv_text))
                self.assertEqual(metrics_json + "\n", simulated)
                self.assertEqual(["note: " + note for note in notes],
                                 support.notes(plan_stderr) + support.notes(export_stderr))
                self.assertEqual(len(actions), args[1])

    def test_post_validation_is_reported_as_left_out(self):
        _, metrics_json, notes = self.plan("zbv", 4, 8, post_validation=True, runtime="any")
        self.assertIn('"post_validation":true', metrics_json)
        self.assertTrue(any("post-validation actions left out" in note for note in notes), notes)

    def test_plans_only_what_torchs_runtime_runs_by_default(self):
        for args, kwargs, message in [
                (("dualpipe", 2, 8), {}, "runtime torch cannot run dualpipe"),
                (("zbv", 4, 8), {"post_validation": True}, "runtime torch cannot run zbv"),
                (("1f1b", 2, 8), {"runtime": "deepspeed"}, "--runtime: unknown runtime")]:
            with self.subTest(message):
                with self.assertRaises(RuntimeError) as raised:
                    self.plan(*args, **kwargs)
                self.assertIn(message, str(raised.exception))
        # Without a runtime auto picks dualpipe at P = 2, which torch's CSV cannot hold; for
        # torch's runtime it picks a plan the CSV holds.
        with self.assertRaises(RuntimeError) as any_runtime:
            self.plan("auto", 2, 8, runtime="any")
        self.assertIn("dual-placement plan (dualpipe)", str(any_runtime.exception))
        actions, _, _ = self.plan("auto", 2, 8)
        self.assertEqual(len(actions), 2)

    def test_errors_carry_the_cli_message(self):
        cases = [
            (("1f1b", 0, 8), {}, "--ranks must be >= 1, got 0"),
            (("nope", 2, 4), {}, "unknown strategy 'nope'"),
            (("zb-h2", 4, 4), {}, "zb-h2 needs at least 2P microbatches"),
            (("1f1b", 2, 4), {"format": "yaml"}, "unknown format 'yaml'"),
            (("1f1b", 2, 4), {"forward": float("nan")}, "--forward: expected a number"),
        ]
        for args, kwargs, message in cases:
            with self.subTest(message):
                with self.assertRaises(RuntimeError) as raised:
                    self.plan(*args, **kwargs)
                self.assertIn("pipeplan::plan: " + message, str(raised.exception))

    def test_request_errors_read_exactly_as_the_cli_says_them(self):
        # The op checks its typed arguments with the function the CLI checks its flags with.
        cases = [
            (("1f1b", 0, 8), {}),
            (("1f1b", 2, 0), {}),
            (("nope", 2, 4), {}),
            (("1f1b", 2, 4), {"forward": -1.5}),
            (("1f1b", 2, 4), {"overlap": 0.0}),
            (("1f1b", 2, 4), {"backward": 1.0, "backward_input": 2.0}),
            (("1f1b", 2, 4), {"forward": 1.0, "costs_file": "costs.txtpb"}),
            (("auto", 2, 4), {"microbatch_group_size": 2}),
            (("1f1b", 2, 4), {"stages_per_rank": 0}),
            (("1f1b", 2, 4), {"memory_limit": -2.0}),
            (("zb-h2", 4, 4), {}),
            # The planner's own errors name request fields; the op, like the CLI, the flags.
            (("1f1b", 2, 4), {"stages_per_rank": 2}),
            (("1f1b", 2, 4), {"microbatch_group_size": 2}),
            (("1f1b", 2, 4), {"post_validation": True}),
        ]
        for args, kwargs in cases:
            with self.subTest(f"{args} {kwargs}"):
                with self.assertRaises(RuntimeError) as raised:
                    self.plan(*args, **kwargs)
                with self.assertRaises(RuntimeError) as cli:
                    support.run_pipeplan("plan", *cli_flags(args, kwargs), "-o",
                                         os.path.join(self.tmp.name, "never.pb"))
                cli_message = str(cli.exception).split("pipeplan plan: error: ", 1)[1]
                cli_message = cli_message.split("\n", 1)[0]
                op_message = str(raised.exception).split("pipeplan::plan: ", 1)[1]
                op_message = op_message.split("\n", 1)[0]
                self.assertEqual(op_message, cli_message)
                self.assertNotIn("topology.", op_message)
                self.assertNotIn("options.", op_message)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
