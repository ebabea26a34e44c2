"""The torchtitan recipe of docs/torch-interop.md against torchtitan's own code.

torchtitan places the stages by its schedule name before it reads our CSV. For every row of
the doc's table (strategy, V, schedule name), at P = 2 and 4, the stages each row of our
`--format torch-csv` export holds must be the ones torchtitan builds on that rank
(`_get_pp_rank_to_stage_indices_mapping`, taken from torchtitan 0.3.0's wheel: the package
itself needs CUDA and many dependencies, this one function needs only torch), and the name
must be a single-stage schedule exactly when V = 1. The row whose name is "none" must refuse
to export.
"""

import ast
import os
import re
import sys
import unittest
import zipfile

import interop_support as support

WHEEL = os.environ.get("PIPEPLAN_TORCHTITAN_WHEEL", os.path.join(
    os.path.expanduser("~"), ".cache", "pipeplan", "wheels", "torchtitan-0.3.0-py3-none-any.whl"))
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                   "torch-interop.md")
PLACEMENT_FUNCTION = "_get_pp_rank_to_stage_indices_mapping"
RANKS = (2, 4)
MICROBATCHES = 8


def require_wheel():
    if not os.path.isfile(WHEEL):
        print(f"skipped: no torchtitan wheel at {WHEEL} (scripts/setup_torch.sh downloads it)")
        sys.exit(support.SKIP_EXIT_CODE)


def torchtitan_placement():
    """torchtitan's placement function, compiled from the wheel's source with the names it
    uses from torch."""
    from torch.distributed.pipelining import schedules
    with zipfile.ZipFile(WHEEL) as wheel:
        source = wheel.read("torchtitan/distributed/pipeline_parallel.py").decode()
    tree = ast.parse(source)
    functions = [node for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name == PLACEMENT_FUNCTION]
    if len(functions) != 1:
        raise RuntimeError(f"{WHEEL}: no function {PLACEMENT_FUNCTION} in "
                           "torchtitan/distributed/pipeline_parallel.py")
    namespace = {"get_schedule_class": schedules.get_schedule_class,
                 "ScheduleZBVZeroBubble": schedules.ScheduleZBVZeroBubble,
                 "ScheduleDualPipeV": schedules.ScheduleDualPipeV}
    exec(compile(ast.Module(body=functions, type_ignores=[]), WHEEL, "exec"), namespace)
    return namespace[PLACEMENT_FUNCTION]


def recipe_rows():
    """(strategies, V values to try, schedule name or None) for each row of the doc's table."""
    with open(DOC, encoding="utf-8") as doc:
        text = doc.read()
    section = text[text.index("## torchtitan"):]
    section = section[:section.index("\n## ")]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        strategies = re.findall(r"`([a-z0-9-]+)`", cells[0])
        v_values = {"1": (1,), "2": (2,), ">= 2": (2, 4)}[cells[1]]
        names = re.findall(r"`([A-Za-z0-9]+)`", cells[2])
        rows.append((strategies, v_values, names[0] if names else None))
    if len(rows) < 4:
        raise RuntimeError(f"{DOC}: found {len(rows)} rows in the torchtitan table, expected 4")
    return rows


def stages_per_row(csv_text):
    """The stage indices each row (rank) of a compute-only torch CSV names, overlap cells
    included."""
    from torch.distributed.pipelining.schedules import _Action
    held = []
    for row in support.csv_rows(csv_text):
        stages = set()
        for cell in row:
            action = _Action.from_str(cell)
            for part in action.sub_actions or (action,):
                stages.add(part.stage_index)
        held.append(stages)
    return held


class TorchtitanPlacement(unittest.TestCase):
    def test_each_recipe_row_places_stages_as_torchtitan_does(self):
        from torch.distributed.pipelining.schedules import (PipelineScheduleSingle,
                                                            get_schedule_class)
        placement = torchtitan_placement()
        checked = 0
        for strategies, v_values, name in recipe_rows():
            for strategy in strategies:
                for ranks in RANKS:
                    for v in v_values:
                        with self.subTest(strategy=strategy, ranks=ranks, v=v, name=name):
                            code, csv_text, stderr = support.try_plan_and_export(
                                "torch-csv", strategy, ranks, v, MICROBATCHES)
                            if name is None:
                                self.assertEqual(code, 1, stderr)
                                continue
                            self.assertEqual(code, 0, stderr)
                            single = issubclass(get_schedule_class(name), PipelineScheduleSingle)
                            self.assertEqual(single, v == 1, f"{name} for V={v}")
                            expected = [set(placement(rank, ranks, name, ranks * v))
                                        for rank in range(ranks)]
                            self.assertEqual(stages_per_row(csv_text), expected)
                            checked += 1
        print(f"{checked} exports place their stages as torchtitan does")
        self.assertGreaterEqual(checked, 40)


if __name__ == "__main__":
    require_wheel()
    sys.exit(support.run_tests(__name__))
