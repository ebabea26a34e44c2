"""pipeplan-torch's gradient clipping and non-finite skip against torch's own, in Python: the
dumps (`--dump-grads`, `--dump-params`, torch.save's format) load with torch.load; the global
norm is torch.nn.utils.clip_grad_norm_'s; one clipped AdamW step equals torch.optim.AdamW on
the clipped gradients, also when made speculatively, rolled back and redone at the next step's
post-validation; a skipped step leaves parameters and AdamW state bit for bit as they were."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import interop_support as support

LR = 0.01
MAX_NORM = 0.05


def run_tool(*args):
    command = [support.env_path("PIPEPLAN_TORCH_BINARY"), "run", *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}:\n"
                           f"{result.stdout}{result.stderr}")


def load(path):
    import torch
    return torch.load(path, weights_only=True)


class ClipReferenceTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-clip-")
        self.plan = os.path.join(self.tmp.name, "plan.pb")
        support.run_pipeplan("plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4",
                             "-o", self.plan)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.tmp.name, *parts)

    def test_one_clipped_step_is_torchs_clip_grad_norm_then_adamw(self):
        self.check_first_step(self.plan, steps=1, stages=2, max_norm=MAX_NORM)

    def test_a_speculative_step_redone_at_post_validation_is_the_same(self):
        plan = self.path("zbv-pv.pb")
        support.run_pipeplan("plan", "--strategy", "zbv", "--ranks", "2", "--microbatches", "4",
                             "--post-validation", "-o", plan)
        # 0.25 lies between rank 0's own norm (stages 0 and 3: about 0.19) and the global one
        # (about 0.28): rank 0 updates at the end of step 1, and rolls back at step 2's PV.
        metrics = self.check_first_step(plan, steps=2, stages=4, max_norm=0.25)
        first = {m["rank"]: m for m in metrics if m["step"] == 1}
        self.assertTrue(first[0]["rolled_back"])
        self.assertGreater(first[0]["replayed_forwards"], 0)
        self.assertFalse(first[1]["rolled_back"])

    def check_first_step(self, plan, steps, stages, max_norm):
        """Step 1's update against torch's clip_grad_norm_ then AdamW; returns the metrics."""
        import torch
        run_tool(plan, "--transport", "inproc", "--steps", steps, "--warmup", "0",
                 "--optimizer", "adamw", "--lr", LR, "--clip-grad-norm", max_norm,
                 "--dump-grads", self.path("grads"), "--dump-params", self.path("params"),
                 "--metrics", self.path("metrics.jsonl"))
        with open(self.path("metrics.jsonl"), encoding="utf-8") as lines:
            metrics = [json.loads(line) for line in lines]
        self.assertEqual(len(metrics), 2 * steps)
        params, names = [], []
        for stage in range(stages):
            before = load(self.path("params", "step-0", f"stage-{stage}.pt"))
            grads = load(self.path("grads", f"stage-{stage}.pt"))
            self.assertEqual((before["stage"], before["step"], before["optimizer_step"]),
                             (stage, 0, 0))
            for name, value in before["params"].items():
                p = torch.nn.Parameter(value.clone())
                p.grad = grads["grads"][name].clone()
                params.append(p)
                names.append((stage, name))
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm).item()
        for m in metrics:
            if m["step"] != 1:
                continue
            self.assertTrue(m["clipped"])
            self.assertAlmostEqual(m["global_grad_norm"] / norm, 1.0, delta=1e-5)
        optimizer = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.0)
        optimizer.step()
        after = {stage: load(self.path("params", "step-1", f"stage-{stage}.pt"))
                 for stage in range(stages)}
        for p, (stage, name) in zip(params, names):
            got = after[stage]["params"][name]
            error = ((got - p.detach()).abs().max() / p.detach().abs().max().clamp_min(1e-12))
            self.assertLessEqual(error.item(), 1e-4, f"stage {stage} {name}")
            state = optimizer.state[p]
            for key in ("exp_avg", "exp_avg_sq"):
                mine = after[stage]["optimizer_state"][name][key]
                theirs = state[key]
                scale = theirs.abs().max().clamp_min(1e-30)
                self.assertLessEqual(((mine - theirs).abs().max() / scale).item(), 1e-4,
                                     f"stage {stage} {name} {key}")
            self.assertEqual(after[stage]["optimizer_step"], 1)
        return metrics

    def test_a_skipped_step_leaves_parameters_and_adamw_state_bit_for_bit(self):
        import torch
        run_tool(self.plan, "--transport", "inproc", "--steps", "3", "--warmup", "0",
                 "--optimizer", "adamw", "--lr", LR, "--clip-grad-norm", MAX_NORM,
                 "--inject-nonfinite", "2:1", "--dump-params", self.path("params"))
        for stage in (0, 1):
            one = load(self.path("params", "step-1", f"stage-{stage}.pt"))
            two = load(self.path("params", "step-2", f"stage-{stage}.pt"))
            three = load(self.path("params", "step-3", f"stage-{stage}.pt"))
            self.assertEqual((one["optimizer_step"], two["optimizer_step"],
                              three["optimizer_step"]), (1, 1, 2))
            for name, value in one["params"].items():
                self.assertTrue(torch.equal(value, two["params"][name]), f"{stage} {name}")
                self.assertFalse(torch.equal(value, three["params"][name]), f"{stage} {name}")
                for key in ("exp_avg", "exp_avg_sq"):
                    self.assertTrue(torch.equal(one["optimizer_state"][name][key],
                                                two["optimizer_state"][name][key]))


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
