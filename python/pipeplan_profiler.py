"""Profile a torch.distributed.pipelining job for `pipeplan import --format torch-trace`.

Put this directory on sys.path (or copy the file) and wrap the training loop:

    from pipeplan_profiler import profile_steps

    with profile_steps("traces", warmup=1, active=3) as next_step:
        for batch in loader:
            schedule.step(...)
            next_step()

Every rank writes traces/rank<r>.json.gz (torch.profiler with record_shapes off,
profile_memory on, no stacks; CUDA activity too when CUDA is available) covering the `active`
steps after `warmup` ones, and rank 0 prints the pipeplan command that imports them. Pipeplan
reads the "PP:<action>" range around every action; the steps are torch.profiler's
ProfilerStep ranges. Only torch and the standard library are used.

Which schedules mark their actions: torch's schedule runtime does (_PipelineScheduleRuntime:
every schedule loaded with _load_csv, ScheduleLoopedBFS, ScheduleInterleaved1F1B,
ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble, ScheduleDualPipeV). Torch 2.11's
single-stage classes (Schedule1F1B, ScheduleGPipe) do not: pass the schedule,
`profile_steps(..., schedule=schedule)`, and its stage's forward, backward and transfer
calls are marked here, under the same names (mark_actions).

Python's garbage collector runs between steps, not inside them (as torchtitan's gc_freq does):
an automatic collection lands inside whichever action allocates at that moment and stalls it
for tens of milliseconds with no operator running, which the measured step then holds and no
cost model can (on a 2-core VM, torch's ScheduleZBVZeroBubble measured 15-43% over its
simulated step with it, 5-8% without). `collect_garbage=False` leaves the collector alone.

Memory on a CPU: torch's CPU allocator reports to the profiler only what is allocated while it
records, so a CPU trace's "Total Allocated" leaves out everything older (parameters, optimizer
state, the batch, the runtime's receive buffers). At each step's end every rank therefore
counts the bytes of the CPU tensors alive (every tensor the garbage collector tracks, and the
gradients of the leaves among them, each storage once) and writes them into the trace's
metadata, "pipeplan_live_bytes": {step number: bytes}; the import adds what the trace did not
count to every memory figure of that step, so static memory and peaks are the process's
whole. On a GPU the CUDA allocator's total already is, and nothing is added.

Layers: given `layers=` (the model, or {name: module} of the layers this rank holds), every
layer's forward and backward of each microbatch gets a range of its own (mark_layers), and the
traces also make a layer cost file for `pipeplan partition`:
`pipeplan import --format torch-layer-trace`.

Gradients: given the schedule, every rank also writes "pipeplan_stages": per stage it holds,
its parameters' bytes and whether their gradients were allocated when the step's first forward
began. They are not where the loop frees them between steps (`zero_grad(set_to_none=True)`,
torch's default): the stage's first backward allocates them, in the middle of the step, which
the memory model then counts there instead of as static memory.
"""

import contextlib
import functools
import gc
import json
import os
import warnings

import torch
from torch.profiler import record_function


def _rank():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def live_cpu_tensor_bytes():
    """The bytes of CPU tensor storage alive now: every tensor object the garbage collector
    tracks and the gradients of the leaves among them (a gradient lives in C++ until Python
    reads it), each storage counted once."""
    storages = {}

    def count(tensor):
        if tensor.device.type != "cpu" or tensor.layout != torch.strided:
            return
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return  # a wrapper subclass without storage of its own
        storages[storage.data_ptr()] = max(storages.get(storage.data_ptr(), 0), storage.nbytes())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance on deprecated objects (reduce_op) warns
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    for obj in tensors:
        count(obj)
        if obj.is_leaf and obj.requires_grad and obj.grad is not None:
            count(obj.grad)
    storages.pop(0, None)  # empty storages share the null pointer
    return sum(storages.values())


class _GradientWatch:
    """Per stage: its parameters' bytes, and whether their gradients were allocated when the
    step's first forward began (a forward pre-hook on the stage's module, removed on exit)."""

    def __init__(self, stages):
        self.stages = stages
        self._held = {}  # stage index -> gradients allocated at this step's first forward
        self._hooks = []

    def __enter__(self):
        for stage in self.stages:
            self._hooks.append(stage.submod.register_forward_pre_hook(self._hook(stage)))
        return self

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return False

    def _hook(self, stage):
        def first_forward(module, args):
            if stage.stage_index not in self._held:
                self._held[stage.stage_index] = any(
                    p.grad is not None for p in module.parameters() if p.requires_grad)
        return first_forward

    def end_step(self):
        out = {}
        for stage in self.stages:
            params = [p for p in stage.submod.parameters() if p.requires_grad]
            out[str(stage.stage_index)] = {
                "parameter_bytes": _nbytes(params),
                "gradients_held": self._held.get(stage.stage_index, True)}
        self._held = {}
        return out


def import_command(directory, world_size, plan=None):
    """The `pipeplan import` command for the traces written under `directory`."""
    traces = " ".join(os.path.join(directory, f"rank{r}.json.gz") for r in range(world_size))
    # Without a plan, the order the job ran becomes the plan: --plan-output keeps it, for
    # `simulate` and `diff` of the run as it was.
    plan_flag = f" --plan {plan}" if plan else " --plan-output ran.pb"
    return f"pipeplan import --format torch-trace {traces}{plan_flag} -o measured.pb"


def layer_import_command(directory, world_size):
    """The `pipeplan import` command that makes a layer cost file of the traces' layer ranges."""
    traces = " ".join(os.path.join(directory, f"rank{r}.json.gz") for r in range(world_size))
    return f"pipeplan import --format torch-layer-trace {traces} -o layers.json"


def _marks_its_actions(schedule):
    """Whether torch's runtime already names every action of `schedule` "PP:<action>"."""
    from torch.distributed.pipelining import schedules
    return isinstance(schedule, getattr(schedules, "_PipelineScheduleRuntime", ()))


def _splits_backward(schedule):
    """Whether `schedule`'s actions split a backward into I and W (torch's zero-bubble classes,
    a zero-bubble plan loaded into its runtime)."""
    from torch.distributed.pipelining.schedules import _ComputationType
    split = (_ComputationType.BACKWARD_INPUT, _ComputationType.BACKWARD_WEIGHT)
    for attribute in ("pipeline_order", "pipeline_order_with_comms"):
        for actions in (getattr(schedule, attribute, None) or {}).values():
            if any(a is not None and a.computation_type in split for a in actions):
                return True
    return False


def _stages_of(schedule):
    stage = getattr(schedule, "_stage", None)
    return [stage] if stage is not None else list(getattr(schedule, "_stages", []))


# The stage's calls a schedule makes, each with the action it is: (method, kind). A compute
# call is marked around its work; a transfer call only makes the P2P operations the schedule
# then posts, so it is marked right after it, where the post follows (and only when it made
# any: the first stage receives no activations, the last no gradients).
_COMPUTE = [("forward_one_chunk", lambda kwargs: "F"),
            ("backward_one_chunk", lambda kwargs: "B" if kwargs.get("full_backward", True)
             else "I"),
            ("backward_weight_one_chunk", lambda kwargs: "W")]
_TRANSFERS = [("get_fwd_recv_ops", "RECV_F"), ("get_fwd_send_ops", "SEND_F"),
              ("get_bwd_recv_ops", "RECV_B"), ("get_bwd_send_ops", "SEND_B")]


def _marked_compute(stage, original, kind_of):
    @functools.wraps(original)
    def marked(chunk, *args, **kwargs):
        with record_function(f"PP:{stage.stage_index}{kind_of(kwargs)}{chunk}"):
            return original(chunk, *args, **kwargs)
    return marked


def _marked_transfer(stage, original, kind):
    @functools.wraps(original)
    def marked(chunk, *args, **kwargs):
        ops = original(chunk, *args, **kwargs)
        if ops:
            with record_function(f"PP:{stage.stage_index}{kind}{chunk}"):
                pass
        return ops
    return marked


@contextlib.contextmanager
def mark_actions(schedule):
    """Names every action of `schedule` "PP:<action>" (as torch's schedule runtime does) while
    the block runs, for a schedule whose runtime does not (Schedule1F1B, ScheduleGPipe in
    torch 2.11); a schedule that marks its own actions is left as it is."""
    if schedule is None or _marks_its_actions(schedule):
        yield
        return
    replaced = []
    for stage in _stages_of(schedule):
        for name, kind_of in _COMPUTE:
            if hasattr(stage, name):
                replaced.append((stage, name, getattr(stage, name)))
                setattr(stage, name, _marked_compute(stage, getattr(stage, name), kind_of))
        for name, kind in _TRANSFERS:
            if hasattr(stage, name):
                replaced.append((stage, name, getattr(stage, name)))
                setattr(stage, name, _marked_transfer(stage, getattr(stage, name), kind))
    try:
        yield
    finally:
        for stage, name, _ in replaced:
            delattr(stage, name)  # the instance attribute goes; the class's method is back


# Per-layer ranges (mark_layers): what `pipeplan import --format torch-layer-trace` reads.
LAYER_RANGE_PREFIX = "pipeplan.layer."


def layers_of(layers):
    """(name, module) pairs in model order: a module's children, a ModuleList's or ModuleDict's
    entries one by one ("layers.0", "layers.1", ...); a dict or a list of pairs as given. A
    stage of pipeplan.torch.split_model names its layers as the model does (its `names`), and
    split_model's {stage index: stage} gives its stages' layers in stage order."""
    if isinstance(layers, dict) and layers and all(isinstance(k, int) for k in layers):
        return [pair for index in sorted(layers) for pair in layers_of(layers[index])]
    names = getattr(layers, "names", None)
    inner = getattr(layers, "layers", None)
    if (isinstance(layers, torch.nn.Module) and isinstance(names, list)
            and isinstance(inner, torch.nn.ModuleList) and len(names) == len(inner)):
        return list(zip(names, inner))
    if isinstance(layers, torch.nn.Module):
        pairs = []
        for name, child in layers.named_children():
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
                pairs.extend((f"{name}.{sub}", module) for sub, module in child.named_children())
            else:
                pairs.append((name, child))
        return pairs
    if isinstance(layers, dict):
        return list(layers.items())
    return list(layers)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _on_gradient(tensor, end, call):
    """Calls `call` when the gradient of `tensor` is computed. One hook per tensor runs every
    call registered on it, the ends of ranges before the beginnings: a tensor is one layer's
    input and the previous layer's output, and its backward range must close before the
    previous layer's opens (ranges of one thread nest)."""
    marks = tensor.__dict__.get("_pipeplan_marks")
    if marks is None:
        marks = ([], [])
        tensor._pipeplan_marks = marks

        def fire(grad):
            for pending in marks:
                for pending_call in pending:
                    pending_call()
                pending.clear()
        tensor.register_hook(fire)
    marks[0 if end else 1].append(call)


class _Backward:
    """One microbatch's backward of one layer: opens when the first of the layer's outputs gets
    its gradient, closes when the last of its inputs that need one has it (a layer whose inputs
    need none, an embedding's, closes when its parameters' gradients are accumulated)."""

    def __init__(self, name, ends):
        self.name = name
        self.ends = ends
        self.range = None

    def begin(self):
        if self.range is None:
            self.range = record_function(f"{LAYER_RANGE_PREFIX}backward:{self.name}")
            self.range.__enter__()

    def end(self):
        self.ends -= 1
        if self.ends == 0 and self.range is not None:
            self.range.__exit__(None, None, None)


class _LayerMarks:
    def __init__(self, name, module):
        self.name = name
        self.module = module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.open = []  # (forward range, inputs needing a gradient), innermost last
        self.waiting = []  # backwards that close when the parameters' gradients are in
        self.output_bytes = None

    def pre_forward(self, module, args, kwargs):
        inputs = [t for t in _tensors((args, kwargs)) if t.requires_grad]
        forward = record_function(f"{LAYER_RANGE_PREFIX}forward:{self.name}")
        forward.__enter__()
        self.open.append((forward, inputs))

    def post_forward(self, module, args, kwargs, output):
        forward, inputs = self.open.pop()
        forward.__exit__(None, None, None)
        outputs = [t for t in _tensors(output) if t.requires_grad]
        self.output_bytes = _nbytes(_tensors(output))
        if not outputs or not (inputs or self.params):
            return  # no backward, or nothing that would tell where it ends
        backward = _Backward(self.name, len(inputs) if inputs else len(self.params))
        for tensor in inputs:
            _on_gradient(tensor, True, backward.end)
        if not inputs:
            self.waiting.append(backward)
        for tensor in outputs:
            _on_gradient(tensor, False, backward.begin)

    def accumulated(self, param):
        if self.waiting:
            self.waiting[0].end()
            if self.waiting[0].ends == 0:
                self.waiting.pop(0)

    def facts(self):
        out = {"parameter_bytes": _nbytes(list(self.module.parameters()))}
        if self.output_bytes is not None:
            out["output_bytes"] = self.output_bytes
        return out


class LayerMarks:
    """Marks each layer's forward and backward of every microbatch with a torch.profiler range,
    "pipeplan.layer.forward:<name>" and "pipeplan.layer.backward:<name>", while the block runs
    (module hooks and gradient hooks, removed on exit). `add_metadata(prof)` writes each layer's
    parameter and output bytes into the trace ("pipeplan_layers")."""

    def __init__(self, layers):
        self.layers = [_LayerMarks(name, module) for name, module in layers_of(layers)]
        if not self.layers:
            raise ValueError("layers: nothing to mark (a module with no children, or an empty "
                             "list)")
        self._hooks = []

    def __enter__(self):
        for layer in self.layers:
            self._hooks.append(layer.module.register_forward_pre_hook(layer.pre_forward,
                                                                      with_kwargs=True))
            self._hooks.append(layer.module.register_forward_hook(layer.post_forward,
                                                                  with_kwargs=True))
            for param in layer.params:
                self._hooks.append(param.register_post_accumulate_grad_hook(layer.accumulated))
        return self

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        return False

    def add_metadata(self, prof):
        prof.add_metadata_json("pipeplan_layers",
                               json.dumps({layer.name: layer.facts() for layer in self.layers}))


def mark_layers(layers):
    """A context manager marking `layers` (see layers_of, LayerMarks) for
    `pipeplan import --format torch-layer-trace`."""
    return LayerMarks(layers)


@contextlib.contextmanager
def profile_steps(directory, warmup=1, active=3, plan=None, quiet=False, collect_garbage=True,
                  schedule=None, layers=None):
    """Profiles `active` steps after `warmup` ones; yields the function to call after each step.

    `plan`: the pipeplan plan the job runs (its CSV export loaded with _load_csv), only for the
    printed command. The trace is written when the last active step ends. `collect_garbage`:
    automatic garbage collection off inside the block, a collection at each step's end instead.
    `schedule`: the schedule the loop steps; needed only for one that does not name its actions
    itself (Schedule1F1B, ScheduleGPipe: see mark_actions). `layers`: the model's layers this
    rank runs (a module, whose children they are, or {name: module}); each one's forward and
    backward is marked for `pipeplan import --format torch-layer-trace` (see mark_layers); refused
    with a schedule that splits backwards into I and W, where the marks would time I alone.
    """
    if warmup < 0 or active < 1:
        raise ValueError(f"need warmup >= 0 and active >= 1, got {warmup} and {active}")
    if layers is not None and schedule is not None and _splits_backward(schedule):
        # A layer's range closes with its input's gradient; its weights' come later, in a W
        # the range cannot see: the range would be taken for a whole B.
        raise ValueError(
            f"layers: {type(schedule).__name__} splits each backward into I and W, so a layer's "
            "marked backward would time its I alone; profile a schedule with whole backwards "
            "(Schedule1F1B, ScheduleInterleaved1F1B) for the layers' figures, or measure I and "
            "W with pipeplan.torch.measure_layers")
    rank, world_size = _rank()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"rank{rank}.json.gz")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    live_bytes = {}  # ProfilerStep number -> live CPU tensor bytes at its end
    gradients = _GradientWatch(_stages_of(schedule) if schedule is not None else [])

    recording = (torch.profiler.ProfilerAction.RECORD,
                 torch.profiler.ProfilerAction.RECORD_AND_SAVE)

    def record_memory(prof):
        if prof.current_action not in recording:
            return  # a warm-up step: not in the trace
        # The whole map each time: a key added again replaces the one before.
        if not torch.cuda.is_available():  # the CUDA allocator's total counts everything
            live_bytes[str(prof.step_num)] = live_cpu_tensor_bytes()
            prof.add_metadata_json("pipeplan_live_bytes", json.dumps(live_bytes))
        if gradients.stages:
            prof.add_metadata_json("pipeplan_stages", json.dumps(gradients.end_step()))
        if marks is not None:
            marks.add_metadata(prof)

    marks = LayerMarks(layers) if layers is not None else None
    profiler = torch.profiler.profile(
        activities=activities, record_shapes=False, profile_memory=True, with_stack=False,
        schedule=torch.profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda prof: prof.export_chrome_trace(path))
    with mark_actions(schedule), gradients, marks or contextlib.nullcontext(), profiler as prof:
        def end_step():
            record_memory(prof)
            prof.step()

        if not collect_garbage:
            yield end_step
        else:
            was_enabled = gc.isenabled()
            gc.disable()

            def next_step():
                gc.collect(1)
                end_step()

            try:
                yield next_step
            finally:
                if was_enabled:
                    gc.enable()
    if rank == 0 and not quiet:
        print(f"pipeplan_profiler: traces in {directory}; import them with:\n  "
              f"{import_command(directory, world_size, plan)}", flush=True)
        if layers is not None:
            print("pipeplan_profiler: and the layers' figures, for 'pipeplan partition', with:\n"
                  f"  {layer_import_command(directory, world_size)}", flush=True)
