"""Parameters tied across ranks (an LM head sharing its embedding's matrix) in torch's
`_PipelineScheduleRuntime`.

Every rank builds the whole model, so each holds its own copy of a tied parameter, and a split
that puts its layers on different ranks leaves each copy only the gradients of the layers on
its rank: the copies drift apart and the model trains as no unsplit model would. As Megatron
does for its tied embeddings:

- at the end of every step the ranks holding a copy sum their gradients, each adding them in
  ascending rank order, so that every copy takes the same bits and the same update;
- when the schedule is built, the copies are made the lowest such rank's, so they start equal.

A rank holding every layer that uses the parameter (a V shape's rank 0 holds the first and the
last stage) exchanges nothing: its one parameter takes both stages' gradients. Either way the
stages leave a tied parameter's gradient undivided by the microbatch count (torch divides per
stage, so a rank's two stages sharing it would divide it twice, once too early); the step's end
divides it once. Ranks are the pipeline's
(the plan's); the transfers are point to point, one per tie and peer, tagged by the tie.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime


@dataclasses.dataclass(frozen=True)
class Tie:
    """One parameter used by layers of more than one stage."""

    name: str  # its first name in the model, e.g. "tok_embeddings.weight"
    stages: tuple[int, ...]  # the split's stages (by depth) whose layers use it, ascending
    ranks: tuple[int, ...]  # the pipeline ranks holding one of those stages, ascending
    param: torch.nn.Parameter = dataclasses.field(compare=False, repr=False)


def find_ties(model: torch.nn.Module, stage_layers: Sequence[Sequence[str]],
              rank_of_stage: Mapping[int, int]) -> list[Tie]:
    """The parameters of `model` that layers of more than one of `stage_layers` (each stage's
    layer names, by depth) use, in the model's parameter order."""
    first_name = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        first_name.setdefault(id(param), (name, param))
    stages_of: dict[int, set[int]] = {}
    for stage, names in enumerate(stage_layers):
        for layer_name in names:
            for param in model.get_submodule(layer_name).parameters():
                stages_of.setdefault(id(param), set()).add(stage)
    ties = []
    for key, (name, param) in first_name.items():
        stages = tuple(sorted(stages_of.get(key, ())))
        if len(stages) > 1:
            ranks = tuple(sorted({rank_of_stage[stage] for stage in stages}))
            ties.append(Tie(name, stages, ranks, param))
    return ties


class TiedRuntime(_PipelineScheduleRuntime):
    """torch's runtime whose step ends by summing the tied parameters' gradients across the
    ranks that hold them (see the module's docstring)."""

    def __init__(self, stages: list, n_microbatches: int, *, ties: Sequence[Tie], rank: int,
                 group: Optional[dist.ProcessGroup], **kwargs: Any):
        super().__init__(stages, n_microbatches, **kwargs)
        # Tagged by the position in the split's list, which every rank holds alike.
        self._ties = {tag: tie for tag, tie in enumerate(ties) if rank in tie.ranks}
        self._rank = rank
        self._group = group

    def step(self, *args: Any, **kwargs: Any) -> Any:
        output = super().step(*args, **kwargs)
        trained = {tag: tie for tag, tie in self._ties.items() if tie.param.requires_grad}
        grads = [tie.param.grad if tie.param.grad is not None else torch.zeros_like(tie.param)
                 for tie in trained.values()]
        for tie, own, theirs in zip(trained.values(), grads, self._exchange(trained, grads)):
            total = None
            for rank in tie.ranks:
                part = own if rank == self._rank else theirs[rank]
                total = part.clone() if total is None else total.add_(part)
            if self.scale_grads:  # the stages left it undivided
                total.div_(self._n_microbatches)
            tie.param.grad = total
        return output

    def make_copies_equal(self) -> None:
        """Each tied parameter := the lowest holding rank's copy."""
        values = [tie.param.detach() for tie in self._ties.values()]
        received = self._exchange(self._ties, values)
        with torch.no_grad():
            for tie, theirs in zip(self._ties.values(), received):
                if tie.ranks[0] != self._rank:
                    tie.param.copy_(theirs[tie.ranks[0]])

    def _exchange(self, ties: Mapping[int, Tie],
                  tensors: Sequence[torch.Tensor]) -> list[dict[int, torch.Tensor]]:
        """Sends each tie's tensor to the other ranks holding it; returns, per tie, theirs by
        rank."""
        ops, received = [], []
        for (tag, tie), tensor in zip(ties.items(), tensors):
            theirs = {}
            for rank in tie.ranks:
                if rank == self._rank:
                    continue
                peer = dist.get_global_rank(self._group, rank) if self._group else rank
                theirs[rank] = torch.empty_like(tensor)
                ops.append(dist.P2POp(dist.isend, tensor.contiguous(), peer, self._group,
                                      tag=tag))
                ops.append(dist.P2POp(dist.irecv, theirs[rank], peer, self._group, tag=tag))
            received.append(theirs)
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        return received
