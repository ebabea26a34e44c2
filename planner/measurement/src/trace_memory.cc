#include "trace_memory.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace pipeplan {
namespace {

// The allocator's total at `time`: after the last event at or before it; before the first
// event, what that event found (its total less what it allocated).
double AllocatedAt(const std::vector<const TraceMemory*>& memory, double time) {
  const auto after = std::upper_bound(memory.begin(), memory.end(), time,
                                      [](double t, const TraceMemory* m) { return t < m->time; });
  if (after == memory.begin()) return memory.front()->allocated - memory.front()->bytes;
  return (*std::prev(after))->allocated;
}

// Torch's runtime may hold a tensor of one step until the next step overwrites it (a stage's
// output kept as the input of a stage on the same rank): its free then falls inside the next
// step's F, which would net what it keeps less that tensor. A free whose allocation (paired by
// address) came before `step_start` is such a free.
std::vector<bool> FreedFromBefore(const std::vector<const TraceMemory*>& events,
                                  double step_start) {
  std::vector<bool> out(events.size(), false);
  std::unordered_map<int64_t, double> allocated_at;  // address -> when its live block came
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceMemory& m = *events[i];
    if (!m.address.has_value() || *m.address == 0) continue;
    if (m.bytes > 0) {
      allocated_at[*m.address] = m.time;
      continue;
    }
    const auto block = allocated_at.find(*m.address);
    if (m.bytes >= 0 || block == allocated_at.end()) continue;
    out[i] = block->second < step_start && m.time >= step_start;
    allocated_at.erase(block);
  }
  return out;
}

// A CPU trace's allocator total counts only what was allocated while the profiler recorded;
// the job's own count of its live tensors at the step's end (TorchTrace::live_bytes) less the
// total there is what it held besides. 0 where the job did not count (or on a GPU, whose
// allocator counts everything).
double UntrackedBytes(const TorchTrace& trace, const std::vector<const TraceMemory*>& memory,
                      int step) {
  if (memory.empty()) return 0.0;
  const auto live = std::find_if(trace.live_bytes.begin(), trace.live_bytes.end(),
                                 [&](const auto& entry) { return entry.first == step; });
  const auto range = std::find_if(trace.steps.begin(), trace.steps.end(),
                                  [&](const TraceStep& s) { return s.number == step; });
  if (live == trace.live_bytes.end() || range == trace.steps.end()) return 0.0;
  return std::max(0.0, live->second - AllocatedAt(memory, range->end));
}

// The memory events an import reads: the device allocator's on GPU traces, else the CPU's.
std::vector<const TraceMemory*> MemoryEvents(const TorchTrace& trace, bool device) {
  std::vector<const TraceMemory*> events;
  for (const TraceMemory& m : trace.memory) {
    if (m.device == device) events.push_back(&m);
  }
  return events;
}

}  // namespace

ActionMemory MemoryOf(const RankMemory& memory, double start, double end) {
  const std::vector<const TraceMemory*>& events = memory.events;
  const auto by_time = [](double t, const TraceMemory* m) { return t < m->time; };
  const size_t first =
      std::upper_bound(events.begin(), events.end(), start, by_time) - events.begin();
  const size_t last = std::upper_bound(events.begin(), events.end(), end, by_time) - events.begin();
  double held_over = 0.0;
  for (size_t i = first; i < last; ++i) {
    if (memory.freed_from_before[i]) held_over -= events[i]->bytes;
  }
  ActionMemory result;
  result.start = AllocatedAt(events, start) - held_over;
  result.end = AllocatedAt(events, end);
  result.peak = std::max(result.start, result.end);
  for (size_t i = first; i < last; ++i) {
    if (memory.freed_from_before[i]) held_over += events[i]->bytes;
    result.peak = std::max(result.peak, events[i]->allocated - held_over);
  }
  result.start += memory.untracked;
  result.end += memory.untracked;
  result.peak += memory.untracked;
  return result;
}

RankMemory MemoryOfStep(const TorchTrace& trace, bool device, int step) {
  RankMemory memory{.events = MemoryEvents(trace, device), .freed_from_before = {}, .untracked = 0};
  const auto range = std::find_if(trace.steps.begin(), trace.steps.end(),
                                  [&](const TraceStep& s) { return s.number == step; });
  memory.freed_from_before = FreedFromBefore(
      memory.events,
      range != trace.steps.end() ? range->start : -std::numeric_limits<double>::infinity());
  if (!device) memory.untracked = UntrackedBytes(trace, memory.events, step);
  return memory;
}

}  // namespace pipeplan
