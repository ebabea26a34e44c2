"""What measure_layers reads a piece of work with: its time (`Clock`) and the bytes it holds
for a while inside (`Meter`). Both answer `measure(work) -> (figure, work's result)`, so one
run of a layer's parts can be taken with either."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


class Clock:
    """Wall time of a piece of work on the model's device, in ms: CUDA events on a GPU (the
    kernels' time, not the launches'), the host's clock elsewhere."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def measure(self, work: Callable[[], Any]) -> tuple[float, Any]:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = work()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end), result
        start_s = time.perf_counter()
        result = work()
        return (time.perf_counter() - start_s) * 1000.0, result


class Meter:
    """The bytes a piece of work holds for a while above the larger of what is held at its
    start and at its end (a memory model's transient: temporaries, a softmax's, a logits'
    gradient): on a GPU the CUDA allocator's peak; elsewhere the running sum of the
    allocations and frees the CPU allocator reports to torch's profiler. A block allocated
    before the work and freed inside it is not reported there, so on a CPU a part that frees
    what an earlier one kept (W freeing the graph) reads a little high at its end, and its
    transient a little low."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.net = 0.0  # what the last work left held: its end's bytes less its start's

    def measure(self, work: Callable[[], Any]) -> tuple[float, Any]:
        if self.cuda:
            torch.cuda.synchronize()
            start = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            result = work()
            torch.cuda.synchronize()
            end = torch.cuda.memory_allocated()
            self.net = float(end - start)
            return float(max(0, torch.cuda.max_memory_allocated() - max(start, end))), result
        # One cycle: acc_events only keeps torch from warning that cycles clear their events.
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                     acc_events=True) as prof:
            result = work()
        held = peak = 0
        for change in _allocations(prof):
            held += change
            peak = max(peak, held)
        self.net = float(held)
        return float(max(0, peak - max(0, held))), result


def _allocations(prof: profile) -> list[int]:
    """The bytes of each allocation (+) and free (-) the profile recorded, in order: its
    trace's memory events, as torch writes them for Chrome's viewer."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as trace:
            events = json.load(trace).get("traceEvents", [])
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    return [int(e.get("args", {}).get("Bytes", 0)) for e in memory]
