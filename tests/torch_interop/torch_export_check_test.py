"""Every plan the catalogue makes, over a grid of P, V and M, exported in both of torch's CSV
formats and put through torch's own checks: `_validate_schedule` (counts and order per stage),
`_add_send_recv` (lowering a compute-only file, as `_load_csv` does) and
`_simulate_comms_compute` (a dry run that fails on a deadlock). Each export passes them, or
refuses with exit 1 (dualpipe: two model copies, which torch's grammar cannot express).
F&B overlap cells are expanded into their F and B for the simulator, which cannot take them
even for torch's own DualPipeV.
"""

import sys
import unittest

import interop_support as support

# strategy -> (stages per rank, placement, the M values to try).
GRID = {
    "gpipe": (1, "loop"), "1f1b": (1, "loop"), "interleaved-1f1b": (2, "loop"),
    "looped-bfs": (2, "loop"), "1f1b-overlap": (1, "loop"),
    "interleaved-1f1b-overlap": (2, "loop"), "zb-h1": (1, "loop"), "zb-h2": (1, "loop"),
    "zb": (1, "loop"), "interleaved-zb": (2, "loop"), "zbv": (2, "v"),
    "zbv-handcrafted": (2, "v"), "v-half": (2, "v"), "v-min": (2, "v"),
    "dualpipe-v": (2, "v"), "dualpipe": (2, "dual"),
}
RANKS = (2, 4)
MICROBATCHES = (8, 12)
REFUSED = {"dualpipe"}


def stage_to_rank(placement, ranks):
    if placement == "loop":
        return lambda stage: stage % ranks
    # V: rank r holds stages r and 2P-1-r.
    return lambda stage: stage if stage < ranks else 2 * ranks - 1 - stage


def parse_rows(csv_text):
    from torch.distributed.pipelining.schedules import _Action
    return {rank: [_Action.from_str(cell) for cell in row]
            for rank, row in enumerate(support.csv_rows(csv_text))}


def expand_overlap(actions):
    """Overlap cells as their sub-actions, in order; REDUCE_GRAD dropped (no dependency)."""
    from torch.distributed.pipelining.schedules import OVERLAP_F_B, REDUCE_GRAD
    out = {}
    for rank, row in actions.items():
        flat = []
        for action in row:
            if action.computation_type == OVERLAP_F_B and action.sub_actions:
                flat.extend(action.sub_actions)
            elif action.computation_type != REDUCE_GRAD:
                flat.append(action)
        out[rank] = flat
    return out


class TorchExportCheckTest(unittest.TestCase):

    def test_every_export_passes_torchs_checks_or_refuses(self):
        from torch.distributed.pipelining import schedules
        checked = refused = 0
        for strategy, (stages_per_rank, placement) in GRID.items():
            for ranks in RANKS:
                for microbatches in MICROBATCHES:
                    num_stages = ranks * stages_per_rank
                    to_rank = stage_to_rank(placement, ranks)
                    for csv_format in ("torch-csv", "torch-csv-comms"):
                        name = f"{strategy} P={ranks} M={microbatches} {csv_format}"
                        with self.subTest(name):
                            code, csv_text, stderr = support.try_plan_and_export(
                                csv_format, strategy, ranks, stages_per_rank, microbatches)
                            if strategy in REFUSED:
                                self.assertEqual(code, 1, stderr)
                                self.assertIn("dualpipe-v", stderr)
                                refused += 1
                                continue
                            self.assertEqual(code, 0, stderr)
                            actions = parse_rows(csv_text)
                            compute = {rank: [a for a in row if a.is_compute_op]
                                       for rank, row in actions.items()}
                            schedules._validate_schedule(compute, ranks, num_stages,
                                                         microbatches)
                            if csv_format == "torch-csv":
                                actions = schedules._add_send_recv(
                                    expand_overlap(compute), to_rank, num_stages)
                            schedules._simulate_comms_compute(expand_overlap(actions), to_rank,
                                                              num_stages)
                            checked += 1
        print(f"{checked} exports passed torch's checks, {refused} refused")
        self.assertGreater(checked, 100)


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))
