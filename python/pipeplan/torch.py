"""pipeplan plans in torch's own pipelining runtime (torch.distributed.pipelining).

    import pipeplan, pipeplan.torch
    plan = pipeplan.plan("zbv", ranks=world, microbatches=8, runtime="torch")
    schedule = pipeplan.torch.schedule(plan, build_stage, loss_fn=mse_loss)
    schedule.step(inputs, target=targets, losses=losses)      # as with torch's own classes

`schedule` builds the stages this rank holds as the plan places them (a V shape's rank 0 holds
stages 0 and 2P - 1; a dual plan's two model copies, see _two_copies.py), loads the plan's
actions into torch's `_PipelineScheduleRuntime` and returns it. Only this module imports
torch; `import pipeplan` does not.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
from torch.distributed.pipelining import _backward as _torch_backward
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

from . import Error, Plan, Split, _count, _flag
from ._gauges import Clock, Meter
from ._layer_check import check_layers_make_the_model, outside_parameters, random_states
from ._layer_check import restore_random_states
from ._tensors import detached as _detached, leaves as _leaves, map_tensors as _map_tensors
from ._tensors import nbytes as _nbytes
from ._tied import Tie, TiedRuntime, find_ties
from ._two_copies import CopyStage, GlooSafeStage, TwoCopyRuntime
from .pipeplan_profiler import layers_of, mark_layers, profile_steps

__all__ = ["mark_layers", "measure_layers", "profile_steps", "schedule", "split_model"]

# What sums gradients across data-parallel ranks itself: under a dual plan pipeplan does.
_DATA_PARALLEL_WRAPPERS = (torch.nn.parallel.DistributedDataParallel, FSDPModule,
                           FullyShardedDataParallel)

StageModules = Union[Callable[[int], torch.nn.Module], Sequence[torch.nn.Module],
                     Mapping[int, torch.nn.Module]]


class _PlanStage(GlooSafeStage):
    """A stage of a one-copy plan in torch's runtime. Tied parameters (`unscaled`, _tied.py)
    are left out of the stage's division of its gradients by the microbatch count: a rank's
    two stages sharing one would each divide it, one of them before the other's backwards had
    all been added; the runtime divides them once, at the step's end."""

    def __init__(self, *args: Any, unscaled: frozenset[int] = frozenset(), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._unscaled = unscaled

    def scale_grads(self, grad_scale_factor: int) -> None:
        if grad_scale_factor == 1:
            return
        for param in self.submod.parameters():
            if param.grad is not None and id(param) not in self._unscaled:
                param.grad.div_(grad_scale_factor)


class _LayerStage(torch.nn.Module):
    """A stage of a split: the model's own modules (its parameters, not copies), applied one
    after the other, each to the previous one's output; with the split's tied parameters,
    which schedule() keeps equal across ranks (_tied.py)."""

    def __init__(self, names: Sequence[str], modules: Sequence[torch.nn.Module],
                 ties: Sequence[Tie] = ()):
        super().__init__()
        self.names = list(names)
        self.layers = torch.nn.ModuleList(modules)
        self.ties = list(ties)  # every tie of the split, the same list on every rank

    def forward(self, *args: Any) -> Any:
        # torch hands a stage the previous stage's outputs as arguments; a layer takes the
        # previous layer's output whole (a tuple where it returned one), as in the model.
        x = args[0] if len(args) == 1 else args
        for layer in self.layers:
            x = layer(x)
        # An input handed on untouched (a block passing its auxiliary loss through) would be
        # both the stage's input and its output, whose gradient torch's stage then loses: the
        # output is a copy.
        inputs = {id(tensor) for tensor in _leaves(args)}
        return _map_tensors(x, lambda t: t.clone() if id(t) in inputs else t)


def _storages(model: torch.nn.Module) -> set[int]:
    """The storages of `model`'s parameters and buffers, which a rank holds whether or not a
    microbatch is in flight."""
    return {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}


def _saved_bytes(work: Callable[[], Any], held: set[int]) -> tuple[Any, int]:
    """Runs `work` (a forward) and counts the bytes autograd saved for its backward, each
    storage once, leaving out the storages `held` (the model's own: a linear layer saves its
    weight)."""
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in held:
            seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = work()
    return result, sum(seen.values())


def _backward_input(heads: list[torch.Tensor], grads: Optional[list[torch.Tensor]],
                    inputs: list[torch.Tensor],
                    params: Sequence[torch.nn.Parameter]) -> list[dict[str, Any]]:
    """I as torch's zero-bubble schedules run it (``stage_backward_input``): the inputs'
    gradients, keeping what W needs; returns that for :func:`_backward_weight`."""
    _, groups = _torch_backward.stage_backward_input(heads, grads, inputs, iter(params))
    return groups


def _backward_weight(params: Sequence[torch.nn.Parameter], groups: list[dict[str, Any]]) -> None:
    """W as torch's zero-bubble schedules run it (``stage_backward_weight``): the weights'
    gradients from what :func:`_backward_input` kept, none of I's work done again."""
    _torch_backward.stage_backward_weight(iter(params), groups)


def _split_backward(gauge: Union[Clock, Meter], heads: list[torch.Tensor],
                    grads: Optional[list[torch.Tensor]], inputs: list[torch.Tensor],
                    params: Sequence[torch.nn.Parameter]) -> tuple[float, float, float]:
    """I and W of one microbatch's backward from `heads` (the loss, or the outputs with
    `grads`), as `gauge` reads them, and with a Meter what I changed the bytes held by, its
    input gradients aside (0 with a Clock). No input to take a gradient (an embedding's tokens): I is 0 and W the whole
    backward; no parameters: W is 0 and I the whole backward."""
    if not heads or not (inputs or params):
        return 0.0, 0.0, 0.0
    if not inputs:
        weight, _ = gauge.measure(lambda: torch.autograd.backward(heads, grads, inputs=params))
        return 0.0, weight, 0.0
    if not params:
        grad_input, _ = gauge.measure(lambda: torch.autograd.backward(heads, grads,
                                                                      inputs=inputs))
        return grad_input, 0.0, 0.0
    # torch's I detaches the outputs in place, which a view (a Linear's on 3-d input) refuses:
    # a copy's backward hands the gradient through untouched.
    roots = [head.clone() if head._is_view() else head for head in heads]
    grad_input, groups = gauge.measure(lambda: _backward_input(roots, grads, inputs, params))
    # I leaves the inputs' gradients (handed back) and what W computes from (kept for it),
    # less what of the graph it frees (torch's I detaches the outputs): may be negative.
    kept = getattr(gauge, "net", 0.0) - sum(_nbytes(t) for t in inputs)
    weight, _ = gauge.measure(lambda: _backward_weight(params, groups))
    return grad_input, weight, kept


def _one_run(gauge: Union[Clock, Meter], forward: Callable[[], Any], loss_fn: Optional[Callable],
             params: Sequence[torch.nn.Parameter]) -> dict[str, float]:
    """A layer's forward, its whole backward, and its backward again split into I and W, one
    microbatch, each part as `gauge` reads it."""
    f, (inputs, _, heads) = gauge.measure(forward)
    grads = None if loss_fn is not None else [torch.ones_like(head) for head in heads]
    b = 0.0
    if heads and (inputs or params):
        b, _ = gauge.measure(lambda: torch.autograd.backward(
            heads, grads, retain_graph=True, inputs=inputs + params))
    i, w, kept = _split_backward(gauge, heads, grads, inputs, params)
    return {"forward": f, "backward": b, "backward_input": i, "backward_weight": w,
            "allocated_by_input": kept}


def _measure_layer(clock: Clock, meter: Meter, module: torch.nn.Module, x: Any,
                   input_grad: bool, loss_fn: Optional[Callable], target: Any, warmup: int,
                   repeats: int, held: set[int]) -> tuple[dict[str, float], Any]:
    """One layer of measure_layers on input `x` (the loss counted when `loss_fn` is given):
    its figures and its output. `input_grad`: whether the backward computes the input's
    gradient (its float tensors'), as for every layer but the first."""
    params = [p for p in module.parameters() if p.requires_grad]

    def forward() -> tuple[list[torch.Tensor], Any, list[torch.Tensor]]:
        inp = _detached(x, grad=input_grad)
        out = module(inp)
        inputs = [tensor for tensor in _leaves(inp) if tensor.requires_grad]
        if loss_fn is not None:
            return inputs, out, [loss_fn(out, target)]
        return inputs, out, [tensor for tensor in _leaves(out) if tensor.requires_grad]

    runs = []
    # The gradients accumulate into .grad as a step's microbatches do; the caller's are put
    # back afterwards.
    kept_grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        for run in range(warmup + repeats):
            figures = _one_run(clock, forward, loss_fn, params)
            if run >= warmup:
                runs.append(figures)
        # Once more for the bytes each part holds inside it, the gradients allocated already,
        # as in a step's later microbatches.
        transients = _one_run(meter, forward, loss_fn, params)
    finally:
        for p, kept in zip(params, kept_grads):
            p.grad = kept
    (_, out, _), activation = _saved_bytes(forward, held)
    entry = {kind: statistics.median(figures[kind] for figures in runs)
             for kind in ("forward", "backward", "backward_input", "backward_weight")}
    entry["activation"] = activation
    entry["parameter_bytes"] = sum(_nbytes(p) for p in module.parameters())
    entry["output_bytes"] = sum(_nbytes(tensor) for tensor in _leaves(out))
    for kind, name in (("forward", "forward_transient"), ("backward", "backward_transient"),
                       ("backward_input", "input_transient"),
                       ("backward_weight", "weight_transient")):
        entry[name] = transients[kind]
    # What I leaves for W, or where it frees more of the graph than it keeps, what it frees.
    kept = transients["allocated_by_input"]
    entry["allocated_by_input"] = max(kept, 0.0)
    entry["freed_by_input"] = min(max(-kept, 0.0), float(activation))
    return entry, out


def measure_layers(model: torch.nn.Module, example_input: Any, loss_fn: Optional[Callable] = None,
                   *, target: Any = None, layers: Optional[Sequence[str]] = None,
                   repeats: int = 5, warmup: int = 2, optimizer_multiple: float = 1.0,
                   path: Union[str, "os.PathLike[str]", None] = None,
                   check: bool = True) -> dict:
    """Measures each top-level layer of ``model`` on one microbatch, on the device its
    parameters are on: forward, full backward, and the backward split into I (input gradient)
    and W (weight gradient) as torch's zero-bubble schedules split it (W computes the weights'
    gradients from what I kept, not the backward again), medians of ``repeats`` runs after
    ``warmup``, in ms (CUDA events on a GPU); gradients accumulate into ``.grad`` as a step's
    microbatches do (the model's own are put back afterwards); and bytes: what its forward
    saves for the backward (``activation``; not the parameters and buffers it saves, which the
    rank holds anyway), its parameters (a parameter several layers use, such as a head tied
    to its embedding, in each one's, and listed under ``shared_parameters``) and its output,
    and what each part holds for a while
    inside it above the larger of its start's and its end's (``forward_transient``,
    ``backward_transient``, ``input_transient``, ``weight_transient``: a large vocabulary's
    softmax and logits' gradient; the CUDA allocator's peak on a GPU, the allocations torch's
    profiler records elsewhere), and what its I changes that by (torch's I keeps the
    gradients W computes the weights' from, ``allocated_by_input``, and frees what of the
    graph W does not need, ``freed_by_input`` where that is more). The layers run in
    order, each on the previous one's output (a model of top-level layers, as
    :func:`split_model` builds stages); ``loss_fn(output, target)`` counts with the last.
    Returns the layer costs dict ``pipeplan.partition`` takes, and writes it as JSON to
    ``path`` when given.

    ``optimizer_multiple``: the bytes of gradients and optimizer state a rank holds per
    parameter byte, beside the parameters (static memory: parameter bytes x (1 + it)); 1, the
    default, counts the gradients alone (SGD without momentum); Adam with fp32 state and
    gradients: 3.

    ``layers``: the names to measure, in order (default: the model's children, a ModuleList's
    entries one by one). A layer's input and output are a tensor or a (nested) tuple or list
    of them (a mixture-of-experts block passing its auxiliary loss on), each layer taking the
    previous one's whole. The first layer takes the model's input, whose gradient no stage
    computes (images as much as an embedding's tokens): its I is 0 and its W the whole
    backward; so is any layer's whose input holds no float tensor. The model's buffers (a
    BatchNorm's running statistics) and the random generators' states are put back after.

    ``check`` (default True): first runs ``model(example_input)`` and the layers in turn on
    it, from the same random state, and raises :class:`pipeplan.Error` where the outputs
    differ: a model whose forward does more than apply its layers in order (a parameter of
    its own added between them, a function applied between them) would be measured, split
    and trained as another model. Where the model cannot be called on the example input alone,
    a warning says the check was not made."""
    # The model's top-level layers in order: its children, a ModuleList's or ModuleDict's
    # entries one by one ("layers.0", "layers.1", ...).
    names = list(layers) if layers is not None else [name for name, _ in layers_of(model)]
    if not names:
        raise Error("layers: the model has no layers to measure")
    repeats = _count("repeats", repeats)
    warmup = _count("warmup", warmup)
    if repeats < 1:
        raise Error(f"repeats must be >= 1, got {repeats}")
    if (isinstance(optimizer_multiple, bool) or not isinstance(optimizer_multiple, (int, float))
            or not math.isfinite(optimizer_multiple) or optimizer_multiple < 0):
        raise Error(f"optimizer_multiple must be a finite number >= 0, got {optimizer_multiple!r}")
    modules = []
    for name in names:
        try:
            modules.append(model.get_submodule(name))
        except AttributeError:
            raise Error(f"layers: the model has no module '{name}'") from None
    parameter = next(model.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    clock, meter = Clock(device), Meter(device)
    held = _storages(model)
    measured = []
    # Measuring changes nothing of the model or of what its training draws: its buffers (a
    # BatchNorm's running statistics) and the random generators' states are put back.
    buffers = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    states = random_states()
    try:
        if _flag("check", check):
            check_layers_make_the_model(model, names, modules, example_input)
        x = example_input
        for index, (name, module) in enumerate(zip(names, modules)):
            last = index == len(modules) - 1
            # The model's input needs no gradient: the first stage's backward computes none.
            entry, out = _measure_layer(clock, meter, module, x, index > 0,
                                        loss_fn if last else None, target, warmup, repeats, held)
            measured.append({"name": name, **entry})
            x = _detached(out, grad=False)
    finally:
        with torch.no_grad():
            for buffer, value in buffers:
                buffer.copy_(value)
        restore_random_states(states)
    costs = {"layers": measured, "time_unit": "ms", "optimizer_multiple": optimizer_multiple}
    # A parameter two layers use (a head tied to its embedding) is in each one's
    # parameter_bytes; partition counts it once on a rank holding both.
    shared = [{"name": tie.name, "bytes": _nbytes(tie.param),
               "layers": [names[index] for index in tie.stages]}
              for tie in find_ties(model, [[name] for name in names],
                                   {index: index for index in range(len(names))})]
    if shared:
        costs["shared_parameters"] = shared
    if path is not None:
        # Whole or not at all: a file half written is never left where the path points.
        target_path = os.fspath(path)
        partial = f"{target_path}.partial-{os.getpid()}"
        with open(partial, "w", encoding="utf-8") as out_file:
            json.dump(costs, out_file, indent=1)
        os.replace(partial, target_path)
    return costs


def split_model(model: torch.nn.Module, split: Split, rank: Optional[int] = None, *,
                free_other_layers: bool = False) -> dict[int, torch.nn.Module]:
    """This rank's stages of a :func:`pipeplan.partition` split: ``{stage index: module}`` for
    every stage its plan places on the rank, each module the model's layers of that stage
    (looked up by name, the layer costs' FQNs) applied in order, each to the previous output,
    as a model of top-level layers runs. Hand the dict to :func:`schedule` with ``split.plan``.
    ``rank`` defaults to this process's rank in the default group. A parameter used by layers
    of two stages (a head tied to the embedding) is kept equal across the ranks holding it by
    the schedule (_tied.py); a dual plan refuses one. ``free_other_layers``: the parameters and
    buffers of the split's layers this rank does not hold (and does not share) are replaced by
    meta tensors, so that the rank keeps only its own stages' memory (build the optimizer
    after)."""
    if not isinstance(split, Split):
        raise Error(f"split must be a pipeplan.Split, got {type(split).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise Error(f"model must be a torch.nn.Module, got {type(model).__name__}")
    plan = split.plan
    if rank is None:
        if not dist.is_initialized():
            raise Error("rank: not given, and torch.distributed is not initialized")
        rank = dist.get_rank()
    rank = _count("rank", rank)
    layers = []
    for depth, names in enumerate(split.stages):
        for name in names:
            try:
                layers.append(model.get_submodule(name))
            except AttributeError:
                raise Error(f"split: stage {depth} holds layer '{name}', which the model has "
                            "no module of") from None
    outside = outside_parameters(model, layers)
    if outside:
        warnings.warn(f"split_model: the model's parameter(s) {', '.join(map(repr, outside))} "
                      "belong to none of the split's layers: no stage uses or trains them "
                      "(measure_layers' check says whether the model is its layers in order)",
                      stacklevel=2)
    rank_of_stage = {index % len(split.stages): r for r in range(plan.ranks)
                     for index in plan.stage_indices(r)}
    ties = find_ties(model, split.stages, rank_of_stage)
    if ties and plan.placement == "dual":
        tie = ties[0]
        raise Error(f"model: parameter '{tie.name}' is used by layers of stages "
                    f"{', '.join(map(str, tie.stages))}, and a dual plan ({plan.strategy}) "
                    "keeps no parameter shared across stages; untie it, or choose a split that "
                    "keeps those layers in one stage")
    free_other_layers = _flag("free_other_layers", free_other_layers)
    stages: dict[int, torch.nn.Module] = {}
    for index in plan.stage_indices(rank):
        names = split.stages[index % len(split.stages)]  # a dual plan's copy B: its depth
        stages[index] = _LayerStage(names, [model.get_submodule(name) for name in names], ties)
    if free_other_layers:
        held = {name for stage in stages.values() for name in stage.names}
        _free_layers(model, [name for names in split.stages for name in names
                             if name not in held], stages.values())
    return stages


def _free_layers(model: torch.nn.Module, names: Sequence[str],
                 kept: Iterable[torch.nn.Module]) -> None:
    """Replaces the parameters and buffers of `model`'s layers `names` by meta tensors of the
    same shapes, but those the `kept` modules use too (a tied matrix)."""
    keep = {id(t) for module in kept for t in (*module.parameters(), *module.buffers())}
    for name in names:
        for module in model.get_submodule(name).modules():
            for key, param in list(module._parameters.items()):
                if param is not None and id(param) not in keep:
                    module._parameters[key] = torch.nn.Parameter(
                        torch.empty_like(param, device="meta"), requires_grad=param.requires_grad)
            for key, buffer in list(module._buffers.items()):
                if buffer is not None and id(buffer) not in keep:
                    module._buffers[key] = torch.empty_like(buffer, device="meta")


def _module_of(stages: StageModules, index: int, num_stages: int,
               depths: int) -> torch.nn.Module:
    """The module of stage `index`; `depths` < `num_stages` for a dual plan, whose stage
    depths + d (copy B) is the model's stage d: a dict or sequence may then give the model's
    stages alone."""
    depth = index % depths
    if callable(stages) and not isinstance(stages, torch.nn.Module):
        module = stages(index)
        where = f"stages({index})"
    elif isinstance(stages, Mapping):
        key = index if index in stages else depth
        if key not in stages:
            raise Error(f"stages: no module for stage {index}, which this rank holds")
        module, where = stages[key], f"stages[{key}]"
    elif isinstance(stages, Sequence):
        if len(stages) not in (num_stages, depths):
            model = f" or the model's {depths} stages" if depths != num_stages else ""
            raise Error(f"stages: {len(stages)} modules, but the plan has {num_stages} stages "
                        f"(give one per stage{model}, or a function of the stage index)")
        key = index if len(stages) == num_stages else depth
        module, where = stages[key], f"stages[{key}]"
    else:
        raise Error("stages must be a function of the stage index, a sequence of one module per "
                    f"stage or a dict of them, got {type(stages).__name__}")
    if not isinstance(module, torch.nn.Module):
        raise Error(f"{where} must be a torch.nn.Module, got {type(module).__name__}")
    return module


def schedule(
    plan: Plan,
    stages: StageModules,
    *,
    loss_fn: Callable[..., torch.Tensor],
    rank: Optional[int] = None,
    device: Union[torch.device, str, None] = None,
    group: Optional[dist.ProcessGroup] = None,
    comms: bool = True,
    scale_grads: bool = True,
    **stage_kwargs: Any,
) -> _PipelineScheduleRuntime:
    """torch's `_PipelineScheduleRuntime` running `plan` on this rank.

    Args:
      plan: a pipeplan.Plan whose ranks are the process group's (plan it with runtime="torch"
        to get only what this runtime executes, with each receive posted when its data is
        sent, which torch's runtime on NCCL needs: docs/torch-interop.md).
      stages: the model's stages: a function of the stage index returning its module (only
        this rank's are built), a sequence of one module per stage (P * V), or a dict. A dual
        plan's (dualpipe) stage P + d is the second copy of the model's stage d: a sequence
        or dict may give the model's P stages alone; the second copy's weights are made the
        first copy's when the schedule is built (docs/python.md).
      loss_fn: as torch's schedules take it, loss_fn(output, target).
      rank: the pipeline rank (default: this process's rank in `group`).
      device: where the stages run (default: cuda:<local rank> under NCCL, else cpu).
      group: the process group of the pipeline (default: the world).
      comms: load pipeplan's transfers (`torch-csv-comms`); False loads the compute order
        only and lets torch insert its own (`torch-csv`). `pipeplan.simulate(plan,
        runtime="torch", export=...)` times either on torch's runtime as modelled.
      scale_grads: divide gradients by the microbatch count, as torch's schedules do.
      stage_kwargs: passed on to every PipelineStage (e.g. input_args, output_args).

    Returns:
      The schedule; call `step(*inputs, target=..., losses=...)` on every rank as with torch's
      own schedule classes (inputs on the rank of stage 0, target where the last stage is; a
      dual plan's ranks 0 and P - 1 pass both, and its step ends by summing the two copies'
      gradients of each layer; stages from `split_model` sharing a parameter across ranks end
      it by summing that parameter's gradients across them).
    """
    if not isinstance(plan, Plan):
        raise Error(f"plan must be a pipeplan.Plan, got {type(plan).__name__}")
    if not callable(loss_fn):
        raise Error(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    comms = _flag("comms", comms)
    dual = plan.placement == "dual"
    if dual and not comms:
        raise Error(f"comms: {plan.strategy} places two model copies (dual placement), and "
                    "torch's own lowering of the transfers (comms=False) knows one chain of "
                    "stages; leave comms=True (pipeplan's transfers)")
    if not dist.is_initialized():
        raise Error("torch.distributed is not initialized: call "
                    "torch.distributed.init_process_group first (torchrun sets the rank)")
    world = dist.get_world_size(group)
    if world != plan.ranks:
        raise Error(f"plan: {plan.ranks} ranks, but the process group has {world}")
    rank = dist.get_rank(group) if rank is None else _count("rank", rank)
    if device is None:
        device = (torch.device("cuda", torch.cuda.current_device())
                  if dist.get_backend(group) == "nccl" else torch.device("cpu"))
    num_stages = plan.ranks * plan.stages_per_rank
    depths = plan.ranks if dual else num_stages
    gloo = dist.get_backend(group) == "gloo"
    modules = {index: _module_of(stages, index, num_stages, depths).to(device)
               for index in plan.stage_indices(rank)}
    actions = {r: [_Action.from_str(token) for token in tokens]
               for r, tokens in enumerate(plan.action_table(comms=comms))}
    if dual:
        for index, module in modules.items():
            if any(isinstance(m, _DATA_PARALLEL_WRAPPERS) for m in module.modules()):
                raise Error(f"stages: stage {index} is wrapped in DDP or FSDP, which a dual plan "
                            f"({plan.strategy}) does not support: its step ends with the two "
                            "copies' gradients summed by pipeplan, not by the wrapper")
        built = [CopyStage(module, index, num_stages, torch.device(device), group=group,
                           depths=depths, gloo=gloo, **stage_kwargs)
                 for index, module in modules.items()]
        runtime = TwoCopyRuntime(built, plan.microbatches, loss_fn=loss_fn,
                                 scale_grads=scale_grads, mirror=plan.ranks - 1 - rank,
                                 group=group)
        runtime._prepare_schedule_with_comms(actions, format="compute_comms")
        runtime.copy_weights_from_mirror()
        return runtime
    # split_model's stages, found inside a wrapper (DDP) too.
    ties = next((inner.ties for module in modules.values() for inner in module.modules()
                 if isinstance(inner, _LayerStage)), [])
    held = [tie for tie in ties if rank in tie.ranks]
    sharded = [index for index, module in modules.items()
               if any(isinstance(m, (FSDPModule, FullyShardedDataParallel))
                      for m in module.modules())]
    if held and sharded:
        raise Error(f"stages: stage {sharded[0]} is sharded by FSDP, and parameter "
                    f"'{held[0].name}' is shared by stages {', '.join(map(str, held[0].stages))}, "
                    "whose gradients pipeplan sums itself; untie it, or wrap the stages in DDP")
    built = [_PlanStage(module, index, num_stages, torch.device(device), group=group, gloo=gloo,
                        unscaled=frozenset(id(tie.param) for tie in held), **stage_kwargs)
             for index, module in modules.items()]
    if held:
        runtime = TiedRuntime(built, plan.microbatches, loss_fn=loss_fn, scale_grads=scale_grads,
                              ties=ties, rank=rank, group=group)
        runtime.make_copies_equal()
    else:
        runtime = _PipelineScheduleRuntime(built, plan.microbatches, loss_fn=loss_fn,
                                           scale_grads=scale_grads)
    if comms:
        runtime._prepare_schedule_with_comms(actions, format="compute_comms")
    else:
        runtime.pipeline_order = actions
        runtime._validate_and_set_stage_mapping(actions)
        runtime._prepare_schedule_with_comms(actions)
    return runtime
