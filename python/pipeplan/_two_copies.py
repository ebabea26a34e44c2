"""Dual placement (DualPipe's two model copies) in torch's `_PipelineScheduleRuntime`.

A dual plan on P ranks has 2P stages: copy A's stage d (0 <= d < P) on rank d, copy B's stage
P + d on rank P - 1 - d, both the model's stage d. Copy A runs the batch's first M/2
microbatches, copy B the other half (the plan's action table numbers them M/2..M-1), so copy
B's first stage, on rank P - 1, reads the second half of the inputs and its last stage, on rank
0, the second half of the targets. torch's runtime keeps one chain of stages, so here:

- a stage knows the end of its own copy (`is_first`/`is_last` by depth), and no activation or
  gradient is handed from one copy's end to the other copy's start on the same rank (rank P - 1
  holds stages P - 1 and P, adjacent indices of different copies);
- the runtime takes its stage -> rank map from the plan (torch's check counts M microbatches
  per stage; each copy's stage runs M/2), and keeps the losses by microbatch;
- after every step each rank adds its mirror's (rank P - 1 - r) gradients of the same layers,
  so both copies take the whole batch's update, as DeepSeek's DualPipe sums them, and the two
  ranks holding a last stage exchange their losses, so each reports all M in batch order;
- when the schedule is built, copy B's weights are made copy A's of the same depth (from the
  mirror), so the two copies start equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime


class GlooSafeStage(PipelineStage):
    """A stage that Gloo can warm up: torch posts a stage's warm-up send/receive to its own rank
    where the neighbouring stage is on the same rank (a V shape's turn, rank P - 1's two
    copies), which Gloo cannot do; the warm-up only opens connections, so under Gloo the
    self-addressed ops are dropped (NCCL needs no such change). `gloo` is set before torch's
    constructor runs."""

    def __init__(self, *args: Any, gloo: bool, **kwargs: Any):
        self._gloo = gloo
        super().__init__(*args, **kwargs)

    def _get_init_p2p_neighbors_ops(self):
        ops = super()._get_init_p2p_neighbors_ops()
        return [op for op in ops if op.group_peer != self.group_rank] if self._gloo else ops


class CopyStage(GlooSafeStage):
    """A stage of one of the two copies: first and last by its depth in its copy."""

    def __init__(self, *args: Any, depths: int, **kwargs: Any):
        self._depths = depths  # set before torch's constructor, which asks is_first
        super().__init__(*args, **kwargs)

    @property
    def is_first(self) -> bool:
        return self.stage_index % self._depths == 0

    @property
    def is_last(self) -> bool:
        return self.stage_index % self._depths == self._depths - 1

    # Rank P - 1's stages P - 1 (copy A's last) and P (copy B's first) have adjacent indices,
    # which torch takes for a V shape's turn: nothing crosses from one copy to the other.
    def set_local_fwd_input(self, prev_stage_outputs: Any, mb_index: int) -> None:
        if not self.is_first:
            super().set_local_fwd_input(prev_stage_outputs, mb_index)

    def get_local_bwd_output(self, mb_index: int):
        return None if self.is_first else super().get_local_bwd_output(mb_index)

    def set_local_bwd_input(self, next_stage_bwd_outputs, mb_index: int) -> None:
        if not self.is_last:
            super().set_local_bwd_input(next_stage_bwd_outputs, mb_index)

    def backward_weight_one_chunk(self, bwd_chunk_id: int, last_backward: bool = False) -> None:
        # torch's W tells a first stage (whose I left the whole backward to W) by index 0, not
        # by is_first: copy B's first stage, P, answers as index 0 for it.
        if not self.is_first or self.stage_index == 0:
            super().backward_weight_one_chunk(bwd_chunk_id, last_backward=last_backward)
            return
        index, self.stage_index = self.stage_index, 0
        try:
            super().backward_weight_one_chunk(bwd_chunk_id, last_backward=last_backward)
        finally:
            self.stage_index = index


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1).float() for t in tensors]) if tensors else torch.zeros(0)


class TwoCopyRuntime(_PipelineScheduleRuntime):
    """torch's runtime over a dual plan's two copies (see the module's docstring)."""

    def __init__(self, stages: list[CopyStage], n_microbatches: int, *, mirror: int,
                 group: Optional[dist.ProcessGroup], **kwargs: Any):
        super().__init__(stages, n_microbatches, **kwargs)
        self._mirror = mirror
        self._group = group
        self._losses_by_microbatch: dict[int, torch.Tensor] = {}

    def _prepare_schedule_with_comms(self, actions: dict[int, list[Optional[_Action]]],
                                     format: str = "compute_comms") -> None:
        # As torch's for "compute_comms", without its check (pipeplan validated the plan), which
        # counts M microbatches per stage where each copy's stage runs M/2.
        if format != "compute_comms":
            raise NotImplementedError("a dual plan loads its transfers (compute_comms)")
        mapping = {}
        for rank, row in actions.items():
            for action in row:
                if action is not None:
                    mapping.setdefault(action.stage_index, rank)
        self.stage_index_to_group_rank = mapping
        for stage in self._stages:
            stage.stage_index_to_group_rank = mapping
        self.pipeline_order_with_comms = {rank: list(row) for rank, row in actions.items()}

    def _maybe_compute_loss(self, stage, output, target_mbs, mb_index):
        if stage.is_last and self._loss_fn is not None:
            self._losses_by_microbatch[mb_index] = self._compute_loss(output, target_mbs[mb_index])

    def _maybe_get_loss(self, stage, mb_index):
        if stage.is_last and self._loss_fn is not None:
            return self._losses_by_microbatch[mb_index]
        return None

    def _update_losses(self, stages, losses):
        pass  # after the mirror's part has come: step()

    def step(self, *args: Any, target: Any = None, losses: Optional[list] = None,
             **kwargs: Any) -> Any:
        self._losses_by_microbatch.clear()
        output = super().step(*args, target=target, losses=losses, **kwargs)
        own = [self._losses_by_microbatch[mb] for mb in sorted(self._losses_by_microbatch)]
        theirs = self._sum_with_mirror(own)
        if losses is not None and own:
            # Rank P - 1 holds copy A's last stage (the first half), rank 0 copy B's.
            holds_copy_a_end = any(stage.is_last for stage in self._by_copy(lambda s: [s])[0])
            losses.clear()
            losses.extend(own + theirs if holds_copy_a_end else theirs + own)
        self._losses_by_microbatch.clear()
        return output

    def _by_copy(self, items_of: Callable[[CopyStage], list]) -> tuple[list, list]:
        """items_of(stage) of this rank's copy A stages, then of its copy B stages."""
        copies: tuple[list, list] = ([], [])
        for stage in self._stages:
            copies[0 if stage.stage_index < stage._depths else 1].extend(items_of(stage))
        return copies

    def _peer(self) -> int:
        """The mirror's rank in the default group (what P2POp takes)."""
        return dist.get_global_rank(self._group, self._mirror) if self._group else self._mirror

    def _sum_with_mirror(self, own_losses: list[torch.Tensor]) -> list[torch.Tensor]:
        """Adds the mirror's gradients of this rank's layers (its copy B's of our copy A's
        depth, and the other way round); returns the mirror's losses (as 0-d tensors)."""
        # Parameters that take gradients, in module order.
        copy_a, copy_b = self._by_copy(
            lambda stage: [p for p in stage.submod.parameters() if p.requires_grad])
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in copy_a + copy_b]
        device = grads[0].device if grads else torch.device("cpu")
        mine = torch.cat([_flat(grads).to(device),
                          torch.stack([loss.detach().float() for loss in own_losses]).to(device)
                          if own_losses else torch.zeros(0, device=device)])
        # The mirror sends its copy A (our copy B's depth) first, then its copy B (our A's).
        theirs = torch.empty_like(mine)
        peer = self._peer()
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, peer, self._group),
                                        dist.P2POp(dist.irecv, theirs, peer, self._group)])
        for work in works:
            work.wait()
        offset = 0
        for param in copy_b + copy_a:
            part = theirs[offset:offset + param.numel()].view_as(param).to(param.dtype)
            offset += param.numel()
            if param.grad is None:
                param.grad = part.clone()
            else:
                param.grad.add_(part)
        return [loss.to(own_losses[0].dtype) for loss in theirs[offset:].unbind()]

    def copy_weights_from_mirror(self) -> None:
        """Copy B's weights := copy A's of the same depth, held by the mirror."""
        copy_a, copy_b = self._by_copy(lambda stage: list(stage.submod.state_dict().values()))
        received = [torch.empty_like(t) for t in copy_b]
        peer = self._peer()
        ops = [dist.P2POp(dist.isend, t.contiguous(), peer, self._group) for t in copy_a]
        ops += [dist.P2POp(dist.irecv, t, peer, self._group) for t in received]
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        with torch.no_grad():
            for target, value in zip(copy_b, received):
                target.copy_(value)
