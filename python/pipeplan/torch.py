"""pipeplan plans in torch's own pipelining runtime (torch.distributed.pipelining).

    import pipeplan, pipeplan.torch
    plan = pipeplan.plan("zbv", ranks=world, microbatches=8, runtime="torch")
    schedule = pipeplan.torch.schedule(plan, build_stage, loss_fn=mse_loss)
    schedule.step(inputs, target=targets, losses=losses)      # as with torch's own classes

`schedule` builds the stages this rank holds as the plan places them (a V shape's rank 0 holds
stages 0 and 2P - 1), loads the plan's actions into torch's `_PipelineScheduleRuntime` and
returns it. Only this module imports torch; `import pipeplan` does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional, Union

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime

from . import Error, Plan, Split, _count, _flag
from .pipeplan_profiler import profile_steps

__all__ = ["profile_steps", "schedule", "split_model"]

StageModules = Union[Callable[[int], torch.nn.Module], Sequence[torch.nn.Module],
                     Mapping[int, torch.nn.Module]]


class _GlooPipelineStage(PipelineStage):
    """torch posts a stage's warm-up send/receive to its own rank when the neighbouring stage
    is on the same rank (the turn of a V placement), which Gloo cannot do; the warm-up only
    opens connections, so the self-addressed ops are dropped. NCCL needs no such change."""

    def _get_init_p2p_neighbors_ops(self):
        return [op for op in super()._get_init_p2p_neighbors_ops()
                if op.group_peer != self.group_rank]


class _LayerStage(torch.nn.Module):
    """A stage of a split: the model's own modules (its parameters, not copies), applied one
    after the other, each to the previous one's output."""

    def __init__(self, names: Sequence[str], modules: Sequence[torch.nn.Module]):
        super().__init__()
        self.names = list(names)
        self.layers = torch.nn.ModuleList(modules)

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


def split_model(model: torch.nn.Module, split: Split,
                rank: Optional[int] = None) -> dict[int, torch.nn.Module]:
    """This rank's stages of a :func:`pipeplan.partition` split: ``{stage index: module}`` for
    every stage its plan places on the rank, each module the model's layers of that stage
    (looked up by name, the layer costs' FQNs) applied in order, each to the previous output,
    as a model of top-level layers runs. Hand the dict to :func:`schedule` with ``split.plan``.
    ``rank`` defaults to this process's rank in the default group."""
    if not isinstance(split, Split):
        raise Error(f"split must be a pipeplan.Split, got {type(split).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise Error(f"model must be a torch.nn.Module, got {type(model).__name__}")
    plan = split.plan
    if plan.placement == "dual":
        raise Error(f"split: {plan.strategy} places two model copies (dual placement), which "
                    "torch's schedules cannot run")
    if rank is None:
        if not dist.is_initialized():
            raise Error("rank: not given, and torch.distributed is not initialized")
        rank = dist.get_rank()
    rank = _count("rank", rank)
    stages: dict[int, torch.nn.Module] = {}
    for index in plan.stage_indices(rank):
        names = split.stages[index]
        modules = []
        for name in names:
            try:
                modules.append(model.get_submodule(name))
            except AttributeError:
                raise Error(f"split: stage {index} holds layer '{name}', which the model has "
                            "no module of") from None
        stages[index] = _LayerStage(names, modules)
    return stages


def _module_of(stages: StageModules, index: int, num_stages: int) -> torch.nn.Module:
    if callable(stages) and not isinstance(stages, torch.nn.Module):
        module = stages(index)
        where = f"stages({index})"
    elif isinstance(stages, Mapping):
        if index not in stages:
            raise Error(f"stages: no module for stage {index}, which this rank holds")
        module, where = stages[index], f"stages[{index}]"
    elif isinstance(stages, Sequence):
        if len(stages) != num_stages:
            raise Error(f"stages: {len(stages)} modules, but the plan has {num_stages} stages "
                        "(give one per stage, or a function of the stage index)")
        module, where = stages[index], f"stages[{index}]"
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
        to get only what this runtime executes).
      stages: the model's stages: a function of the stage index returning its module (only
        this rank's are built), a sequence of one module per stage (P * V), or a dict.
      loss_fn: as torch's schedules take it, loss_fn(output, target).
      rank: the pipeline rank (default: this process's rank in `group`).
      device: where the stages run (default: cuda:<local rank> under NCCL, else cpu).
      group: the process group of the pipeline (default: the world).
      comms: load pipeplan's transfers (receives placed late: `torch-csv-comms`); False loads
        the compute order only and lets torch insert its own (`torch-csv`).
      scale_grads: divide gradients by the microbatch count, as torch's schedules do.
      stage_kwargs: passed on to every PipelineStage (e.g. input_args, output_args).

    Returns:
      The schedule; call `step(*inputs, target=..., losses=...)` on every rank as with torch's
      own schedule classes (inputs on the rank of stage 0, target where the last stage is).
    """
    if not isinstance(plan, Plan):
        raise Error(f"plan must be a pipeplan.Plan, got {type(plan).__name__}")
    if not callable(loss_fn):
        raise Error(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    comms = _flag("comms", comms)
    if plan.placement == "dual":
        raise Error(f"plan: {plan.strategy} places two model copies (dual placement), and torch's "
                    "schedules run one chain of stages; dualpipe-v is its V-shaped form")
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
    stage_type = _GlooPipelineStage if dist.get_backend(group) == "gloo" else PipelineStage
    built = [stage_type(_module_of(stages, index, num_stages).to(device), index, num_stages,
                        torch.device(device), group=group, **stage_kwargs)
             for index in plan.stage_indices(rank)]
    runtime = _PipelineScheduleRuntime(built, plan.microbatches, loss_fn=loss_fn,
                                       scale_grads=scale_grads)
    actions = {r: [_Action.from_str(token) for token in tokens]
               for r, tokens in enumerate(plan.action_table(comms=comms))}
    if comms:
        runtime._prepare_schedule_with_comms(actions, format="compute_comms")
    else:
        runtime.pipeline_order = actions
        runtime._validate_and_set_stage_mapping(actions)
        runtime._prepare_schedule_with_comms(actions)
    return runtime
