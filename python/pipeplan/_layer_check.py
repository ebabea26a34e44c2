"""Whether a model is its layers applied in order, as measure_layers measures it and
split_model builds its stages. A model whose forward does more (a parameter of its own added
between two layers, a function applied between them, a layer skipped) would otherwise be
measured and split into another model, and trained as that one, silently."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Optional

import torch

from . import Error
from ._tensors import leaves


def outside_parameters(model: torch.nn.Module, modules: Sequence[torch.nn.Module]) -> list[str]:
    """The names of `model`'s trainable parameters that none of `modules` holds."""
    inside = {id(p) for module in modules for p in module.parameters()}
    return [name for name, p in model.named_parameters()
            if p.requires_grad and id(p) not in inside]


def random_states() -> tuple[torch.Tensor, Optional[list[torch.Tensor]]]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    return torch.get_rng_state(), cuda


def restore_random_states(states: tuple[torch.Tensor, Optional[list[torch.Tensor]]]) -> None:
    torch.set_rng_state(states[0])
    if states[1] is not None:
        torch.cuda.set_rng_state_all(states[1])


def _difference(whole: Any, chained: Any) -> Optional[str]:
    """How the layers' output differs from the model's; None where they agree (the same ops
    from the same random state: equal but for the order of a parallel reduction)."""
    ours, theirs = leaves(whole), leaves(chained)
    if len(ours) != len(theirs):
        return f"the model returns {len(ours)} tensor(s), its layers {len(theirs)}"
    for index, (a, b) in enumerate(zip(ours, theirs)):
        where = "" if len(ours) == 1 else f" (tensor {index})"
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"the model's output{where} is {a.dtype} {tuple(a.shape)}, its layers' "
                    f"{b.dtype} {tuple(b.shape)}")
        if not a.is_floating_point() or a.numel() == 0:
            if not torch.equal(a, b):
                return f"the model's output{where} and its layers' differ"
            continue
        scale = a.detach().abs().max().item()
        gap = (a.detach() - b.detach()).abs().max().item()
        if not gap <= 1e-5 * scale + 1e-6 and not (math.isnan(gap) and torch.equal(
                a.isnan(), b.isnan())):
            return (f"the model's output{where} and its layers' differ by up to {gap:.3g} "
                    f"(its largest value: {scale:.3g})")
    return None


def check_layers_make_the_model(model: torch.nn.Module, names: Sequence[str],
                                modules: Sequence[torch.nn.Module], example_input: Any) -> None:
    """Raises Error where `model(example_input)` and `modules` applied in turn to it (from the
    same random state: a dropout draws the same masks) differ, naming what the model holds
    outside them; warns where the model cannot be called on the example input alone (its
    forward takes more) or returns no tensor to compare (a dict of outputs), and then checks
    nothing. The random state is left as it was; a
    training-mode forward's buffer updates are the caller's to put back."""
    states = random_states()
    try:
        with torch.no_grad():
            chained = example_input
            for name, module in zip(names, modules):
                try:
                    chained = module(chained)
                except Exception as error:  # noqa: BLE001 - named, then re-raised as Error
                    raise Error(f"layers: layer '{name}' failed on the previous layer's output "
                                f"({type(error).__name__}: {error}); measure_layers and "
                                "split_model apply the layers in order, each to the previous "
                                f"one's output, and {_what_else(model, modules, False)}"
                                ) from error
            restore_random_states(states)
            try:
                whole = model(example_input)
            except Exception as error:  # noqa: BLE001 - any failure means: cannot check
                warnings.warn(
                    f"measure_layers: model(example_input) failed ({type(error).__name__}: "
                    f"{error}), so whether the model is its layers applied in order was not "
                    "checked", stacklevel=3)
                return
    finally:
        restore_random_states(states)
    if not leaves(whole):
        # A dict or dataclass of outputs (a Hugging Face model's): nothing here compares it.
        warnings.warn(f"measure_layers: the model returns {type(whole).__name__}, which holds no "
                      "tensor or tuple of tensors to compare with its layers' output, so whether "
                      "the model is its layers applied in order was not checked", stacklevel=3)
        return
    why = _difference(whole, chained)
    if why is None:
        return
    raise Error(f"model: it is not its layers ({', '.join(names)}) applied in order, each to the "
                f"previous one's output, which measure_layers measures and split_model builds "
                f"stages of: on the example input {why}; {_what_else(model, modules, True)}")


def _what_else(model: torch.nn.Module, modules: Sequence[torch.nn.Module],
               can_skip: bool) -> str:
    """What a model that is not its layers in order likely does besides, and the way out
    (`can_skip`: check=False is one)."""
    outside = outside_parameters(model, modules)
    likely = (f"the model's parameter(s) {', '.join(map(repr, outside))} belong to none of the "
              "layers" if outside else "the model's forward does work between its layers, or "
              "skips or reorders them")
    return (f"{likely}. Move that work into a layer of its own (a module, in model order), or "
            "name the layers with layers=" + ("; check=False skips this check" if can_skip
                                               else ""))
