// What the import reads of a trace's allocator events ("[memory]") for one rank and step: the
// memory of each action. Internal to the measurement layer (import_trace.cc).
#pragma once

#include <vector>

#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// A rank's allocator events as one step's import reads them.
struct RankMemory {
  std::vector<const TraceMemory*> events;  // in time order
  // events[i] frees memory allocated before the step began (see MemoryOfStep).
  std::vector<bool> freed_from_before;
  // What the process held that a CPU trace's allocator total leaves out: the job's own count
  // of its live tensors at the step's end less the total there (0 on a GPU, or uncounted).
  double untracked = 0.0;
};

// The events of `trace` the import reads (the device allocator's on GPU traces, else the
// CPU's), for step number `step`. Torch's runtime may hold a tensor of one step until the next
// step overwrites it (a stage's output kept as the input of a stage on the same rank): its free
// then falls inside the next step's F. A free whose allocation (paired by address) came before
// the step's start is marked freed_from_before.
RankMemory MemoryOfStep(const TorchTrace& trace, bool device, int step);

// An action's memory over [start, end]: the allocator's total at both ends and its peak
// between, plus `untracked`. Frees of memory older than the step count as made at `start`: the
// bytes the action keeps are its own.
ActionMemory MemoryOf(const RankMemory& memory, double start, double end);

}  // namespace pipeplan
