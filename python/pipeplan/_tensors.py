"""A layer's inputs and outputs as measure_layers and split_model take them: a tensor, or a
(nested) tuple or list of tensors and other values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def nbytes(value: Any) -> int:
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


def leaves(value: Any) -> list[torch.Tensor]:
    """The tensors of a layer's input or output: a tensor, or those of a (nested) tuple or
    list, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [tensor for item in value for tensor in leaves(item)]
    return []


def map_tensors(value: Any, change: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`value` (a tensor, or a nested tuple or list) with `change` applied to its tensors."""
    if isinstance(value, torch.Tensor):
        return change(value)
    if isinstance(value, (tuple, list)):
        items = [map_tensors(item, change) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def detached(value: Any, grad: bool) -> Any:
    """`value` with its tensors detached, the floating ones requiring grad when `grad`."""
    def detach(tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.detach()
        return out.requires_grad_(True) if grad and out.is_floating_point() else out
    return map_tensors(value, detach)
