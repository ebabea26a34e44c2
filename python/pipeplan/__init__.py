"""pipeplan: plan, simulate and export pipeline-parallel training schedules.

In process, over the same C++ planner as the ``pipeplan`` command (which this package installs
as its console script): the same request gives the same plan, byte for byte, and the files
each writes the other reads.

    >>> import pipeplan
    >>> plan = pipeplan.plan("1f1b", ranks=4, microbatches=8, forward=1, backward=2)
    >>> pipeplan.simulate(plan).makespan        # (M + P - 1)(F + B)
    33.0
    >>> plan.actions(0)[:3]
    ['0F0', '0SEND_F0', '0F1']

Durations are in any one unit (the costs' unit); memory is in microbatch activations unless a
cost model in bytes is given. Every error is a :class:`pipeplan.Error` (a ``ValueError``) that
names the argument or file at fault. docs/python.md is the full reference.
"""

from __future__ import annotations

import importlib.util as _importlib_util
import json as _json
import math as _math
import os as _os
import sys as _sys
import warnings as _warnings
from numbers import Integral as _Integral, Real as _Real
from typing import Any, Optional, Sequence, Union

from . import _core
from ._core import CostModel, Diff, Error, Plan, Profile, Request, Split, Timeline

__all__ = [
    "CostModel",
    "Diff",
    "Error",
    "Plan",
    "Profile",
    "Request",
    "Split",
    "Timeline",
    "calibrate",
    "compare",
    "diff",
    "import_layer_traces",
    "import_torch_traces",
    "load",
    "partition",
    "plan",
    "profile",
    "simulate",
]
__version__: str = _core.__version__
# Raised and shown as pipeplan.Error, the name users catch.
Error.__module__ = "pipeplan"

# The solver-made strategies run OR-Tools in a Python process: this one's, where pipeplan[solver]
# installed ortools, unless the environment names another.
if "PIPEPLAN_SOLVER_PYTHON" not in _os.environ and _importlib_util.find_spec("ortools"):
    _os.environ["PIPEPLAN_SOLVER_PYTHON"] = _sys.executable

PathLike = Union[str, "_os.PathLike[str]"]


def _count(name: str, value: Any, required: bool = False) -> Optional[int]:
    if value is None:
        if required:
            raise Error(f"{name} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, _Integral):
        raise Error(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _number(name: str, value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, _Real):
        raise Error(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def _text(name: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Error(f"{name} must be a str, got {type(value).__name__} {value!r}")
    return value


def _path(name: str, value: Any) -> str:
    if isinstance(value, (str, _os.PathLike)):
        return _os.fspath(value)
    raise Error(f"{name} must be a path (str or os.PathLike), got {type(value).__name__} {value!r}")


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise Error(f"{name} must be a bool, got {type(value).__name__} {value!r}")
    return value


def _request(
    strategy: Optional[str],
    ranks: Any,
    microbatches: Any,
    stages_per_rank: Any,
    microbatch_group_size: Any,
    forward: Any,
    backward: Any,
    backward_input: Any,
    backward_weight: Any,
    overlap: Any,
    comm: Any,
    receive_overhead: Any,
    costs: Any,
    memory_limit: Any,
    post_validation: Any,
    time_limit: Any,
    runtime: Any,
) -> dict:
    """The keyword arguments, their types checked, as _core takes them."""
    args: dict = {
        "strategy": _text("strategy", strategy),
        "ranks": _count("ranks", ranks, required=True),
        "microbatches": _count("microbatches", microbatches, required=True),
        "stages_per_rank": _count("stages_per_rank", stages_per_rank),
        "microbatch_group_size": _count("microbatch_group_size", microbatch_group_size),
        "runtime": _text("runtime", runtime),
        "time_limit": _number("time_limit", time_limit),
    }
    for name, value in (
        ("forward", forward),
        ("backward", backward),
        ("backward_input", backward_input),
        ("backward_weight", backward_weight),
        ("overlap", overlap),
        ("comm", comm),
        ("receive_overhead", receive_overhead),
    ):
        args[name] = _number(name, value)
    if isinstance(costs, CostModel):
        args["costs"] = costs
    elif costs is not None:
        args["costs_file"] = _path("costs", costs)
    if isinstance(memory_limit, str):
        args["memory_limit_text"] = memory_limit
    else:
        args["memory_limit"] = _number("memory_limit", memory_limit)
    args["post_validation"] = _flag("post_validation", post_validation)
    return args


def plan(
    strategy: str,
    *,
    ranks: int,
    microbatches: int,
    stages_per_rank: Optional[int] = None,
    forward: Optional[float] = None,
    backward: Optional[float] = None,
    backward_input: Optional[float] = None,
    backward_weight: Optional[float] = None,
    overlap: Optional[float] = None,
    comm: Optional[float] = None,
    receive_overhead: Optional[float] = None,
    costs: Union[PathLike, CostModel, None] = None,
    memory_limit: Union[float, str, None] = None,
    post_validation: bool = False,
    microbatch_group_size: Optional[int] = None,
    time_limit: Optional[float] = None,
    runtime: Optional[str] = None,
) -> Plan:
    """Builds a validated plan, as ``pipeplan plan`` does.

    Args:
      strategy: a catalogue name ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv",
        "dualpipe", ...; ``pipeplan plan --help`` lists them), "auto" (the fastest plan that fits
        ``memory_limit``) or a solver-made one ("optimal", "optimal-v", "optimal-fb"; needs
        ``pipeplan[solver]``).
      ranks: pipeline ranks P.  microbatches: microbatches per step M.
      stages_per_rank: V (default: the strategy's smallest).
      forward, backward, backward_input, backward_weight, overlap: one stage's durations
        (B defaults to I + W; I and W to B/2; nothing given: F=1, B=2).
      comm, receive_overhead: per transfer latency and the receiver's overhead.
      costs: a cost file's path or a :class:`CostModel` instead of the durations (a calibrated
        one brings memory in bytes).
      memory_limit: per rank, in activations, or with a byte unit ("70GiB") for a cost model in
        bytes.
      post_validation: insert the optimizer's step-boundary check (rollback flags).
      microbatch_group_size: interleaved strategies' group size (default: P).
      time_limit: seconds the solver may search (solver-made strategies only).
      runtime: plan only what this runtime executes ("torch" for torch's
        _PipelineScheduleRuntime, "pipeplan" for pipeplan-torch).

    Returns:
      The plan, with its simulation under these costs (``simulate(plan)`` returns it) and
      ``notes`` on how it was chosen.

    Raises:
      Error: naming the argument at fault, or why no plan exists (e.g. nothing fits the limit).
    """
    if not isinstance(strategy, str):
        raise Error(f"strategy must be a str, got {type(strategy).__name__} {strategy!r}")
    return _core.plan(
        _request(
            strategy, ranks, microbatches, stages_per_rank, microbatch_group_size, forward,
            backward, backward_input, backward_weight, overlap, comm, receive_overhead, costs,
            memory_limit, post_validation, time_limit, runtime,
        )
    )


def simulate(
    plan: Plan,
    costs: Union[PathLike, CostModel, None] = None,
    *,
    runtime: Optional[str] = None,
    export: Optional[str] = None,
) -> Timeline:
    """The plan's timeline: under its own costs (the simulation made with it), or under
    ``costs`` (a cost file's path or a :class:`CostModel`, fitted to the plan's stages as
    ``pipeplan simulate PLAN --costs FILE`` fits them).

    ``runtime="torch"`` (or ``"torchtitan"``) times it as torch's ``_PipelineScheduleRuntime``
    runs it on NCCL (one comm stream per rank), loaded from ``export``: ``"torch-csv-comms"``
    (default, the plan's transfers) or ``"torch-csv"`` (torch adds its own); the timeline's
    ``plan`` is then the lists torch runs. As ``pipeplan simulate PLAN --runtime torch``."""
    if not isinstance(plan, Plan):
        raise Error(f"plan must be a pipeplan.Plan, got {type(plan).__name__}")
    if costs is not None and not isinstance(costs, CostModel):
        costs = load(_path("costs", costs))
        if not isinstance(costs, CostModel):
            raise Error(f"costs: {type(costs).__name__} file, not a cost model")
    return _core.simulate(plan, costs, runtime, export)


def compare(
    *,
    ranks: int,
    microbatches: int,
    stages_per_rank: Optional[int] = None,
    forward: Optional[float] = None,
    backward: Optional[float] = None,
    backward_input: Optional[float] = None,
    backward_weight: Optional[float] = None,
    overlap: Optional[float] = None,
    comm: Optional[float] = None,
    receive_overhead: Optional[float] = None,
    costs: Union[PathLike, CostModel, None] = None,
    memory_limit: Union[float, str, None] = None,
    post_validation: bool = False,
    runtime: Optional[str] = None,
) -> list[dict[str, Any]]:
    """Every strategy of the catalogue on one request, as ``pipeplan compare`` does.

    The durations (or ``costs``) are one rank's share of the model: a strategy with V stages
    per rank gets each stage 1/V of it. The multi-stage strategies run at ``stages_per_rank``
    (default 2). One dict per strategy, in catalogue order: ``strategy``, ``stages_per_rank``,
    ``makespan``, ``peak_memory`` (the largest over ranks), ``bubble`` (the largest idle
    fraction over ranks), ``best`` (smallest makespan), ``error`` (why it could not plan, else
    None) and ``assumes`` (what its figures rest on that no run measured, else None); under
    ``runtime="torch"`` also ``torch_csv_comms`` and ``torch_csv``, its step on torch's runtime
    from either export (None where torch cannot run it; else None).
    """
    return _core.compare(
        _request(
            None, ranks, microbatches, stages_per_rank, None, forward, backward,
            backward_input, backward_weight, overlap, comm, receive_overhead, costs,
            memory_limit, post_validation, None, runtime,
        )
    )


# The layer figures that are numbers (LayerCosts' Layer, and the file's own multiple).
_LAYER_NUMBERS = ("forward", "backward", "backward_input", "backward_weight", "activation",
                  "freed_by_input", "parameter_bytes", "output_bytes", "forward_transient",
                  "backward_transient", "input_transient", "weight_transient",
                  "allocated_by_input")


def _finite(name: str, value: Any) -> None:
    if not _math.isfinite(_number(name, value)):
        raise Error(f"{name}: must be a finite number >= 0, got {value!r}")


def _layers_json(costs: dict) -> str:
    """The layer costs dict as the JSON the file reader takes, its figures checked first: JSON
    has no NaN or infinity, and a string or bool is not a figure, whatever the reader would
    make of it. Errors name the layer and the field."""
    layers = costs.get("layers")
    if isinstance(layers, (list, tuple)):
        for index, layer in enumerate(layers):
            if not isinstance(layer, dict):
                raise Error(f"layers: layers[{index}] must be a dict, got {type(layer).__name__}")
            where = f"layers: layers[{index}]" + (f" ({layer['name']})" if "name" in layer else "")
            for key in _LAYER_NUMBERS:
                if key in layer:
                    _finite(f"{where}.{key}", layer[key])
    if "optimizer_multiple" in costs:
        _finite("layers: optimizer_multiple", costs["optimizer_multiple"])
    try:
        return _json.dumps(costs, allow_nan=False)
    except (TypeError, ValueError) as error:  # a value JSON cannot hold, outside the figures
        raise Error(f"layers: {error}") from None


def partition(
    layers: Union[PathLike, dict, Sequence[dict]],
    *,
    ranks: int,
    microbatches: int,
    strategy: str = "auto",
    stages_per_rank: Optional[int] = None,
    memory_limit: Union[float, str, Sequence[Union[float, str]], None] = None,
    comm: float = 0.0,
    runtime: Optional[str] = None,
) -> Split:
    """Chooses which layers each stage holds, with the strategy and V, as ``pipeplan
    partition`` does: the smallest simulated step whose every rank fits ``memory_limit``.

    Args:
      layers: a layer costs file's path, a dict as such a JSON file holds (``{"layers": [...],
        "time_unit": "ms"}``) or the list of layer dicts alone: per layer ``name``,
        ``forward``, ``backward`` or ``backward_input`` and ``backward_weight``, optionally
        ``activation``, ``freed_by_input``, ``parameter_bytes``, ``output_bytes`` (bytes).
      ranks, microbatches: P and M.  strategy: a catalogue strategy or "auto".
      stages_per_rank: only this V (default: 1, 2 and 4 where the strategy takes them).
      memory_limit: bytes per rank, a number or a string like "70GiB"; or a list of them,
        one per rank (e.g. another plan's ``peak_memory``: no rank above it).
      comm: latency of each transfer between stages.  runtime: only what it runs ("torch").

    The :class:`Split` gives ``stages`` (layer names per stage, torchtitan's
    module_fqns_per_model_part), ``plan``, ``makespan``, ``megatron_layout`` and the even
    split beside it. :func:`pipeplan.torch.split_model` builds a rank's stages from it.
    """
    args: dict = {
        "ranks": _count("ranks", ranks, required=True),
        "microbatches": _count("microbatches", microbatches, required=True),
        "strategy": _text("strategy", strategy),
        "stages_per_rank": _count("stages_per_rank", stages_per_rank),
        "comm": _number("comm", comm),
        "runtime": _text("runtime", runtime),
    }
    if isinstance(layers, (str, _os.PathLike)):
        args["layers_path"] = _path("layers", layers)
    elif isinstance(layers, dict):
        args["layers_json"] = _layers_json(layers)
    elif isinstance(layers, (list, tuple)):
        args["layers_json"] = _layers_json({"layers": list(layers)})
    else:
        raise Error(f"layers must be a path, a dict or a list of layer dicts, got "
                    f"{type(layers).__name__}")
    if isinstance(memory_limit, str):
        args["memory_limit_text"] = memory_limit
    elif isinstance(memory_limit, (list, tuple)):
        items = [item if isinstance(item, str) else repr(_number("memory_limit", item))
                 for item in memory_limit]
        if not items or any("," in item for item in items):
            raise Error("memory_limit: a list needs one amount per rank, each without commas")
        args["memory_limit_text"] = ",".join(items)
    else:
        args["memory_limit"] = _number("memory_limit", memory_limit)
    return _core.partition(args)


def load(path: PathLike) -> Union[Plan, Timeline, CostModel, Profile, Request]:
    """Reads any pipeplan file (binary, text or JSON) by the kind it records: a plan, a
    timeline, a cost model, a profile or a request (``request.plan()`` plans it). Plans are
    validated as ``pipeplan simulate`` does."""
    return _core.load(_path("path", path))


def profile(timelines: Sequence[Timeline], time_scale: Optional[float] = None) -> Profile:
    """Per stage and kind the spread of the durations in ``timelines`` (of one plan), as
    ``pipeplan profile`` does; ``time_scale`` is the seconds per unit for timelines that record
    none (simulated ones)."""
    if isinstance(timelines, Timeline):
        timelines = [timelines]
    items = list(timelines)
    for i, item in enumerate(items):
        if not isinstance(item, Timeline):
            raise Error(f"timelines[{i}] must be a pipeplan.Timeline, got {type(item).__name__}")
    return _core.profile(items, _number("time_scale", time_scale))


def calibrate(profile: Profile, unit: str = "us") -> CostModel:
    """A cost model from a profile, durations in ``unit`` ("s", "ms", "us" or "ns"), as
    ``pipeplan calibrate`` does; ``plan(costs=...)`` takes it."""
    if not isinstance(profile, Profile):
        raise Error(f"profile must be a pipeplan.Profile, got {type(profile).__name__}")
    return _core.calibrate(profile, _text("unit", unit))


def import_torch_traces(
    paths: Union[PathLike, Sequence[PathLike]], plan: Optional[Plan] = None,
    step: Optional[int] = None,
) -> Timeline:
    """The measured timeline of a torch pipelining job from its torch.profiler traces (one per
    rank, ``.json`` or ``.json.gz``, as ``pipeplan.torch.profile_steps`` writes them), as
    ``pipeplan import --format torch-trace`` reads them: matched to ``plan`` (the plan the job
    ran), else to the order the job ran, torch's transfers included (``timeline.plan``).
    ``step``: the ProfilerStep number (default: the median step). Times in microseconds."""
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    names = [_path(f"paths[{i}]", path) for i, path in enumerate(paths)]
    if plan is not None and not isinstance(plan, Plan):
        raise Error(f"plan must be a pipeplan.Plan, got {type(plan).__name__}")
    return _core.import_torch_traces(names, plan, _count("step", step))


def import_layer_traces(paths: Union[PathLike, Sequence[PathLike]]) -> dict:
    """The layer costs of a job whose layers carry pipeplan's ranges
    (``pipeplan.torch.profile_steps(..., layers=...)``), from its torch.profiler traces (one per
    rank), as ``pipeplan import --format torch-layer-trace`` reads them: the dict
    :func:`partition` takes, times in microseconds. What the figures leave out (I and W not
    split, no bytes without allocator events) is issued as a ``UserWarning`` each."""
    if isinstance(paths, (str, _os.PathLike)):
        paths = [paths]
    names = [_path(f"paths[{i}]", path) for i, path in enumerate(paths)]
    text, notes = _core.import_layer_traces(names)
    for note in notes:
        _warnings.warn(note, stacklevel=2)
    return _json.loads(text)


def diff(expected: Timeline, measured: Timeline) -> Diff:
    """Two timelines of one plan side by side, as ``pipeplan diff`` compares them:
    ``makespan_error`` is measured / expected - 1, ``peak_memory_error`` the same per rank."""
    for name, value in (("expected", expected), ("measured", measured)):
        if not isinstance(value, Timeline):
            raise Error(f"{name} must be a pipeplan.Timeline, got {type(value).__name__}")
    return _core.diff(expected, measured)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the ``pipeplan`` command in this process (``argv`` without the program name)."""
    words = list(_sys.argv[1:] if argv is None else argv)
    _sys.stdout.flush()
    _sys.stderr.flush()
    return _core.main(words)
