"""What the torch interop tests share: the skip rule, the pipeplan command, CSV rows, and
stand-in stage objects that let torch's schedule classes compute their order without a
process group.

Standard library only at import time: torch is imported by the tests after require_torch().
"""

import os
import subprocess
import sys
import unittest
import warnings

# ctest reads this exit code as "skipped" (SKIP_RETURN_CODE in tests/torch_interop).
SKIP_EXIT_CODE = 77

# Seconds any single pipeplan command may take before the test fails instead of hanging.
COMMAND_TIMEOUT_S = 60


def require_torch():
    """Exits with SKIP_EXIT_CODE and a visible reason when torch cannot be imported."""
    # The venv has no numpy; torch warns about it on import, which is noise here.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch  # noqa: F401  (only checks that it imports)
        import torch.distributed.pipelining  # noqa: F401
    except ImportError as error:
        print(f"skipped: torch is not importable from {sys.executable}: {error}")
        sys.exit(SKIP_EXIT_CODE)


def env_path(name):
    """A path ctest passes in the environment; a clear error when it is missing."""
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"${name} is not set (ctest sets it; see tests/torch_interop)")
    if not os.path.exists(value):
        raise RuntimeError(f"${name}={value} does not exist (build the project first)")
    return value


def pipeplan_binary():
    return env_path("PIPEPLAN_CLI")


def run_pipeplan(*args, stdin=None):
    """Runs `pipeplan ARGS`; returns (stdout, stderr). A non-zero exit raises with stderr."""
    command = [pipeplan_binary(), *map(str, args)]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return result.stdout, result.stderr


def diff_errors(simulated, measured):
    """`pipeplan diff SIMULATED MEASURED`'s errors, measured relative to simulated, as fractions:
    (the step's, [each rank's peak memory's])."""
    lines = run_pipeplan("diff", simulated, measured)[0].splitlines()
    step = next(line for line in lines if line.startswith("makespan"))
    header = next(i for i, line in enumerate(lines) if "peak memory simulated" in line)
    memory = []
    for line in lines[header + 1:]:
        if not line.strip():
            break
        memory.append(float(line.split()[-1].rstrip("%")) / 100)
    return float(step.split()[-1].rstrip("%")) / 100, memory


def simulated_errors(traces, work, name):
    """Imports a job's traces without a plan (the plan is what it ran), calibrates a cost model
    from them, simulates that plan with it and returns diff's errors (diff_errors): the measured
    step and each rank's peak memory relative to the simulated ones, as fractions. Files go to
    `work`, named after `name`."""
    measured, plan = (os.path.join(work, f"{name}-{x}.pb") for x in ("measured", "ran"))
    profile = os.path.join(work, f"{name}-profile.json")
    costs = os.path.join(work, f"{name}-costs.txtpb")
    simulated = os.path.join(work, f"{name}-simulated.pb")
    run_pipeplan("import", "--format", "torch-trace", *traces, "-o", measured,
                 "--plan-output", plan)
    run_pipeplan("profile", measured, "-o", profile)
    run_pipeplan("calibrate", profile, "-o", costs)
    run_pipeplan("simulate", plan, "--costs", costs, "--timeline", simulated)
    return diff_errors(simulated, measured)


def plan_args(strategy, ranks, stages_per_rank, microbatches, *extra):
    return ["plan", "--strategy", strategy, "--ranks", ranks, "--stages-per-rank",
            stages_per_rank, "--microbatches", microbatches, *extra]


def plan_and_export(csv_format, strategy, ranks, stages_per_rank, microbatches, *extra):
    """`pipeplan plan ... | pipeplan export - --format CSV_FORMAT`: (csv text, export stderr)."""
    plan, _ = run_pipeplan(*plan_args(strategy, ranks, stages_per_rank, microbatches, *extra),
                           "-o", "-")
    return run_pipeplan("export", "-", "--format", csv_format, stdin=plan)


def try_plan_and_export(csv_format, strategy, ranks, stages_per_rank, microbatches, *extra):
    """`pipeplan plan ... | pipeplan export - --format CSV_FORMAT` where the export may refuse:
    (exit code, csv text, stderr) of the export."""
    plan, _ = run_pipeplan(*plan_args(strategy, ranks, stages_per_rank, microbatches, *extra),
                           "-o", "-")
    result = subprocess.run([pipeplan_binary(), "export", "-", "--format", csv_format],
                            input=plan, capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, check=False)
    return result.returncode, result.stdout, result.stderr


def csv_rows(csv_text):
    """The cells of each row of a torch CSV, empty cells (idle slots) dropped."""
    return [[cell for cell in line.split(",") if cell] for line in csv_text.splitlines()]


def notes(stderr):
    """The `note: ...` lines a pipeplan command printed."""
    return [line for line in stderr.splitlines() if line.startswith("note: ")]


class FakeStage:
    """Carries only what torch's schedule constructors read from a stage (stage count, group
    size and rank, the module for the torch.compile check) and what they write back (the
    stage-to-rank map). Enough to build any schedule class and read its `pipeline_order`
    without a process group; never enough to run one."""

    def __init__(self, ranks, num_stages):
        self.num_stages = num_stages
        self.group_size = ranks
        self.group_rank = 0
        self.submod = None
        self.stage_index_to_group_rank = None


def build_torch_schedule(schedule_class, ranks, stages_per_rank, microbatches):
    """An instance of one of torch's schedule classes on stand-in stages."""
    from torch.distributed.pipelining import schedules
    num_stages = ranks * stages_per_rank
    if issubclass(schedule_class, schedules.PipelineScheduleSingle):
        return schedule_class(FakeStage(ranks, num_stages), microbatches)
    stages = [FakeStage(ranks, num_stages) for _ in range(stages_per_rank)]
    return schedule_class(stages, microbatches)


def compute_order(pipeline_order, ranks):
    """Per rank the compute actions of a torch `pipeline_order` as strings, idle None slots
    and non-compute actions (REDUCE_GRAD, which the single-stage classes add) removed."""
    return [[str(action) for action in pipeline_order[rank]
             if action is not None and action.is_compute_op] for rank in range(ranks)]


def run_tests(module):
    """Runs the unittest cases of `module` verbosely (skipped, exit 77, without torch);
    returns the exit code: 0 when every case passed."""
    require_torch()
    program = unittest.main(module=module, argv=[sys.argv[0], "-v", *sys.argv[1:]],
                            exit=False)
    return 0 if program.result.wasSuccessful() else 1
