"""CSVs torch itself dumped, imported: each multi-stage schedule class writes its schedule with
its own _dump_csv, in both formats (compute_only, and its runtime's default compute_comms);
`pipeplan import` reads it, the imported plan simulates like our own plan of the counterpart
strategy (whose order equals torch's, torch_order_test.py) and to the published makespans
where docs/strategies.md has one, and it round-trips: exported again, it is torch's order
and torch's _load_csv takes it back.
"""

import json
import os
import sys
import tempfile
import unittest

import interop_support as support

# (torch class, pipeplan strategy, P, V, M, extra plan flags, makespan with F=1 B=2 I=W=1 and
# an F&B cell costing 3 (docs/strategies.md), or None).
CASES = [
    ("ScheduleInterleaved1F1B", "interleaved-1f1b", 4, 2, 8, ("--microbatch-group-size", 4), 57),
    ("ScheduleLoopedBFS", "looped-bfs", 2, 2, 4, (), None),
    ("ScheduleInterleavedZeroBubble", "interleaved-zb", 4, 2, 8, (), None),
    ("ScheduleZBVZeroBubble", "zbv-handcrafted", 4, 2, 8, (), None),
    ("ScheduleDualPipeV", "dualpipe-v", 4, 2, 10, (), 66),
]
# torch's _dump_csv format -> `pipeplan import --format`.
DUMP_FORMATS = {"compute_only": "torch-csv", "compute_comms": "torch-csv-comms"}


def metrics_without_strategy(json_line):
    metrics = json.loads(json_line)
    del metrics["strategy"]
    return metrics


class TorchImportTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="pipeplan-torch-import-")
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_torch_dumps_import_simulate_and_round_trip(self):
        from torch.distributed.pipelining import schedules
        for class_name, strategy, ranks, stages_per_rank, microbatches, extra, makespan in CASES:
            schedule = support.build_torch_schedule(getattr(schedules, class_name), ranks,
                                                    stages_per_rank, microbatches)
            torch_order = support.compute_order(schedule.pipeline_order, ranks)
            ours, _ = support.run_pipeplan(
                *support.plan_args(strategy, ranks, stages_per_rank, microbatches, *extra),
                "-o", self.path("ours.pb"))
            ours_metrics, _ = support.run_pipeplan("simulate", self.path("ours.pb"), "--json")
            for dump_format, import_format in DUMP_FORMATS.items():
                with self.subTest(f"{class_name} P={ranks} V={stages_per_rank} "
                                  f"M={microbatches} {dump_format}"):
                    dump = self.path(f"{class_name}-{dump_format}.csv")
                    schedule._dump_csv(dump, format=dump_format)
                    imported = self.path(f"{class_name}-{dump_format}.pb")
                    _, stderr = support.run_pipeplan("import", "--format", import_format, dump,
                                                     "-o", imported)
                    dropped = [n for n in support.notes(stderr) if "dropped torch's" in n]
                    self.assertEqual(len(dropped), 1 if dump_format == "compute_comms" else 0,
                                     stderr)

                    metrics, _ = support.run_pipeplan("simulate", imported, "--json")
                    self.assertEqual(json.loads(metrics)["strategy"], "imported")
                    self.assertEqual(metrics_without_strategy(metrics),
                                     metrics_without_strategy(ours_metrics))
                    if makespan is not None:
                        self.assertEqual(json.loads(metrics)["makespan"], makespan)

                    self.check_round_trip(imported, torch_order, ranks, stages_per_rank,
                                          microbatches)

    def check_round_trip(self, imported, torch_order, ranks, stages_per_rank, microbatches):
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
        exported = self.path("exported.csv")
        support.run_pipeplan("export", imported, "--format", "torch-csv", "-o", exported)
        with open(exported, newline="") as f:
            self.assertEqual(support.csv_rows(f.read()), torch_order)

        # torch takes our export back: its loader validates it and infers the placement.
        num_stages = ranks * stages_per_rank
        reloaded = _PipelineScheduleRuntime(
            [support.FakeStage(ranks, num_stages) for _ in range(stages_per_rank)], microbatches)
        reloaded._load_csv(exported, format="compute_only")
        self.assertEqual(support.compute_order(reloaded.pipeline_order, ranks), torch_order)

        exported_comms = self.path("exported-comms.csv")
        support.run_pipeplan("export", imported, "--format", "torch-csv-comms", "-o",
                             exported_comms)
        reloaded._load_csv(exported_comms, format="compute_comms")
        self.assertEqual(support.compute_order(reloaded.pipeline_order_with_comms, ranks),
                         torch_order)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
