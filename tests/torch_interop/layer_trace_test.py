"""Per-layer figures measured from a user's own job: layer_trace_job.py marks a model's
layers with python/pipeplan_profiler.py (profile_steps(..., layers=...)) in a plain training
loop and in torch's Schedule1F1B and ScheduleInterleaved1F1B over two Gloo processes;
`pipeplan import --format torch-layer-trace` turns the traces into a layer cost file, which
`pipeplan partition` reads.
The model's slow layer sleeps a known time in its forward and backward: the import must find
it there, and each layer's bytes must be what the model's tensors hold.
"""

import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import unittest

import interop_support as support

HERE = os.path.dirname(os.path.abspath(__file__))
JOB_TIMEOUT_S = 300
ORDER = ["embed", "layers.0", "layers.1", "head"]
# The slow layer's sleeps (layer_trace_job.py), in us, and how much longer a loaded machine
# may stretch them (ctest -j2 on 2 cores): a sleep never ends early.
SLEEP_FORWARD_US, SLEEP_BACKWARD_US, STRETCH_US = 20000, 30000, 25000
ROWS, TOKENS, HIDDEN, VOCAB = 2, 16, 64, 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def import_layers(out, *traces):
    support.run_pipeplan("import", "--format", "torch-layer-trace", *traces, "-o", out)
    with open(out) as f:
        return {layer["name"]: layer for layer in json.load(f)["layers"]}, out


class LayerTrace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-layer-trace-")
        work = cls.tmp.name
        job = os.path.join(HERE, "layer_trace_job.py")
        run([sys.executable, job, "--loop", "--out", os.path.join(work, "loop")])
        for name, extra in (("pipeline", []), ("interleaved", ["--interleaved"])):
            run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                 "--master-addr", "127.0.0.1", "--master-port", str(free_port()), job,
                 "--out", os.path.join(work, name), *extra])
        cls.loop_trace = os.path.join(work, "loop", "rank0.json.gz")
        cls.pipeline_traces = [os.path.join(work, "pipeline", f"rank{r}.json.gz")
                               for r in range(2)]
        cls.loop, cls.loop_file = import_layers(os.path.join(work, "loop.json"), cls.loop_trace)
        # Reversed on purpose: the ranks come from the traces, not the order given.
        cls.pipeline, cls.pipeline_file = import_layers(
            os.path.join(work, "pipeline.json"), *reversed(cls.pipeline_traces))
        cls.interleaved, _ = import_layers(
            os.path.join(work, "interleaved.json"),
            *[os.path.join(work, "interleaved", f"rank{r}.json.gz") for r in range(2)])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_slow_layer(self, layers):
        slow = layers["layers.1"]
        self.assertGreaterEqual(slow["forward"], SLEEP_FORWARD_US)
        self.assertLess(slow["forward"], SLEEP_FORWARD_US + STRETCH_US)
        self.assertGreaterEqual(slow["backward"], SLEEP_BACKWARD_US)
        self.assertLess(slow["backward"], SLEEP_BACKWARD_US + STRETCH_US)
        for name in ("embed", "layers.0", "head"):
            # No sleep of theirs: far below the slow layer's, wherever the sleeps land.
            self.assertLess(layers[name]["forward"] + layers[name]["backward"], 5000, name)

    def test_a_training_loops_layers_in_model_order_with_their_known_costs(self):
        self.assertEqual(list(self.loop), ORDER)
        self.check_slow_layer(self.loop)

    def test_each_layers_bytes_are_what_its_tensors_hold(self):
        import torch
        sys.path.insert(0, HERE)
        from layer_trace_job import Model
        model = Model()
        modules = {"embed": model.embed, "layers.0": model.layers[0],
                   "layers.1": model.layers[1], "head": model.head}
        for name, module in modules.items():
            with self.subTest(layer=name):
                expected = sum(p.numel() * p.element_size() for p in module.parameters())
                self.assertEqual(self.loop[name]["parameter_bytes"], expected)
        fp32 = torch.float32.itemsize
        hidden_bytes = ROWS * TOKENS * HIDDEN * fp32
        for name in ("embed", "layers.0", "layers.1"):
            self.assertEqual(self.loop[name]["output_bytes"], hidden_bytes, name)
        self.assertEqual(self.loop["head"]["output_bytes"], ROWS * TOKENS * VOCAB * fp32)
        # A Linear keeps its output (its input and weight it saves are already held): the
        # allocator's total rose by exactly that in its forward.
        self.assertEqual(self.loop["layers.0"]["activation"], hidden_bytes)

    def test_a_pipeline_jobs_layers_from_every_rank(self):
        self.assertEqual(list(self.pipeline), ORDER)
        self.check_slow_layer(self.pipeline)

    def test_an_interleaved_jobs_layers_in_model_order(self):
        # Rank 0 held embed and layers.1, rank 1 layers.0 and head: read rank by rank they
        # would come out of order; the stages that ran them say the order.
        self.assertEqual(list(self.interleaved), ORDER)
        self.check_slow_layer(self.interleaved)

    def test_a_stages_layers_add_up_to_its_measured_forward(self):
        # Rank 1's stage is layers.1 and head; its "PP:1F<m>" ranges (marked around the
        # stage's whole forward by the same job) time it independently of the layer ranges.
        with gzip.open(self.pipeline_traces[1], "rt") as f:
            events = json.load(f)["traceEvents"]
        stage_forward = statistics.median(
            e["dur"] for e in events if e.get("name", "").startswith("PP:1F"))
        layers = self.pipeline["layers.1"]["forward"] + self.pipeline["head"]["forward"]
        # Each layer range lies inside the stage's; medians of parts need not add up exactly.
        self.assertLessEqual(layers, 1.02 * stage_forward)
        self.assertGreater(layers, 0.9 * stage_forward)

    def test_partition_splits_the_imported_layers(self):
        stdout, stderr = support.run_pipeplan("partition", "--layers", self.pipeline_file,
                                              "--ranks", "2", "--microbatches", "4",
                                              "--strategy", "1f1b", "--json")
        split = json.loads(stdout)
        self.assertEqual([name for stage in split["stages"] for name in stage], ORDER)
        # The slow layer is most of the model: its stage sets the step, M of its F + B and
        # the other stage's little (the figures arrive in us, unscaled).
        slow = self.pipeline["layers.1"]["forward"] + self.pipeline["layers.1"]["backward"]
        rest = sum(self.pipeline[name]["forward"] + self.pipeline[name]["backward"]
                   for name in ORDER if name != "layers.1")
        self.assertGreaterEqual(split["makespan"], 4 * slow)
        self.assertLessEqual(split["makespan"], 4 * (slow + rest))

    def test_flags_of_the_action_import_are_refused(self):
        command = [support.pipeplan_binary(), "import", "--format", "torch-layer-trace",
                   self.loop_trace, "--plan", "x.pb"]
        result = subprocess.run(command, capture_output=True, text=True, check=False,
                                timeout=support.COMMAND_TIMEOUT_S)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--plan is not for --format torch-layer-trace", result.stderr)
        # The loop ran no pipeline: its trace has no actions to import as a timeline.
        result = subprocess.run([support.pipeplan_binary(), "import", "--format", "torch-trace",
                                 self.loop_trace], capture_output=True, text=True, check=False,
                                timeout=support.COMMAND_TIMEOUT_S)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("no 'PP:' action ranges", result.stderr)


if __name__ == "__main__":
    sys.exit(support.run_tests(sys.modules[__name__]))
