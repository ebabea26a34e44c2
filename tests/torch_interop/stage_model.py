"""The small model the runtime test trains: NUM_STAGES blocks of Linear + Tanh in float64,
each drawn from its own seed so any rank can build any stage, and the single-process
reference step the pipelined runs must reproduce.

float64 keeps the comparison tight: pipelined and reference runs sum the microbatches'
gradients in different orders, which float32 would blur at 1e-7.
"""

import torch

WIDTH = 8
ROWS_PER_MICROBATCH = 2
DTYPE = torch.float64


def stage_module(stage):
    """Stage `stage` of the model; the same parameters in every process."""
    generator = torch.Generator().manual_seed(1000 + stage)
    linear = torch.nn.Linear(WIDTH, WIDTH, dtype=DTYPE)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(WIDTH, WIDTH, generator=generator, dtype=DTYPE) * 0.5)
        linear.bias.copy_(torch.randn(WIDTH, generator=generator, dtype=DTYPE) * 0.1)
    return torch.nn.Sequential(linear, torch.nn.Tanh())


def batch(microbatches):
    """Inputs and targets of one step: ROWS_PER_MICROBATCH rows per microbatch."""
    generator = torch.Generator().manual_seed(7)
    rows = microbatches * ROWS_PER_MICROBATCH
    inputs = torch.randn(rows, WIDTH, generator=generator, dtype=DTYPE)
    targets = torch.randn(rows, WIDTH, generator=generator, dtype=DTYPE)
    return inputs, targets


def loss_fn(output, target):
    return torch.nn.functional.mse_loss(output, target)


def parameter_name(stage, name):
    return f"stage{stage}.{name}"


def reference_step(num_stages, microbatches):
    """One step without pipelining: the per-microbatch losses and every parameter's gradient
    of their mean (torch's schedules scale gradients by 1/M, as scale_grads=True does)."""
    modules = [stage_module(stage) for stage in range(num_stages)]
    inputs, targets = batch(microbatches)
    losses = []
    for x, y in zip(torch.tensor_split(inputs, microbatches),
                    torch.tensor_split(targets, microbatches)):
        for module in modules:
            x = module(x)
        losses.append(loss_fn(x, y))
    (torch.stack(losses).sum() / microbatches).backward()
    grads = {parameter_name(stage, name): parameter.grad
             for stage, module in enumerate(modules)
             for name, parameter in module.named_parameters()}
    return [loss.detach() for loss in losses], grads
