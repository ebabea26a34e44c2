// Timeline: when each action of a plan ran (simulated or measured), per-rank busy time and
// memory, and the step metrics. The simulator and the runtime both write this type.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/memory_model.h"

namespace pipeplan {

enum class TimelineSource : uint8_t { kSimulated, kMeasured };

// "simulated" or "measured", as reports and diff label a timeline.
inline std::string_view TimelineSourceName(TimelineSource source) {
  switch (source) {
    case TimelineSource::kSimulated:
      return "simulated";
    case TimelineSource::kMeasured:
      return "measured";
  }
  return "simulated";
}

// What timed a measured rank's ops: the host clock around each call (CPU), or CUDA events
// on the device's streams (GPU: kernels run after their launch returns); for a torch.profiler
// trace, the actions' device spans (gpu_user_annotation) or their host ranges.
enum class OpClock : uint8_t { kUnrecorded, kHost, kCudaEvents, kProfilerDevice, kProfilerHost };

// Threads (or streams) of a rank: compute, communication; executors with more streams
// number them from 2 up.
inline constexpr int kComputeThread = 0;
inline constexpr int kCommThread = 1;

// Index-aligned with the rank's program: timing of action `index`.
struct ActionTiming {
  double start = 0.0;
  double end = 0.0;
  int thread = kComputeThread;  // where it ran within the rank (see below)

  bool operator==(const ActionTiming&) const = default;
};

// The first run of an action that a failed post-validation ran again (measured timelines):
// it computed, or carried, what weights that were then undone produced. The rank's
// `actions[action_index]` holds the replay.
struct DiscardedRun {
  size_t action_index = 0;
  ActionTiming timing;

  bool operator==(const DiscardedRun&) const = default;
};

struct MemorySample {
  double time = 0.0;
  double bytes = 0.0;  // static + activations held at `time`

  bool operator==(const MemorySample&) const = default;
};

// Measured memory of one action: the allocator's total (memory_unit) when it began and ended,
// and the most it held in between.
struct ActionMemory {
  double start = 0.0;
  double end = 0.0;
  double peak = 0.0;

  bool operator==(const ActionMemory&) const = default;
};

// What one stage holds from step to step, in bytes (parameters, gradients, optimizer state,
// its data): the part of its rank's static memory that moves with it.
struct StageStatic {
  StageId stage;
  double bytes = 0.0;
  // Of `bytes`, the data the stage holds as a chain's end: the model's inputs on the first
  // stage, the loss's targets on the last. Data belong to the chain's ends, not to a depth of
  // the model (stage_recut.h).
  double input_bytes = 0.0;
  double target_bytes = 0.0;
  // The stage's parameter gradients where the runtime allocates them anew each step
  // (set_to_none), not in `bytes`: its first backward allocates them.
  double gradient_bytes = 0.0;

  bool operator==(const StageStatic&) const = default;
};

struct RankTimeline {
  RankId rank;
  std::vector<ActionTiming> actions;
  double busy = 0.0;                     // total compute time
  double first_start = 0.0;              // first compute start
  double last_end = 0.0;                 // last compute end
  double peak_activation_memory = 0.0;   // activations only
  double peak_memory = 0.0;              // static + activations
  std::vector<MemorySample> memory;      // after every change
  OpClock clock = OpClock::kUnrecorded;  // measured timelines: what timed the ops
  MemoryUnit memory_unit = MemoryUnit::kModel;
  std::vector<ActionMemory> action_memory;  // measured: empty, or index-aligned with actions
  std::vector<DiscardedRun> discarded;      // measured: runs a failed validation replaced
  std::vector<StageStatic> stage_static;    // measured: the rank's stages, where told

  bool operator==(const RankTimeline&) const = default;
};

// Definitions (docs/planning.md §4):
//   bubble_fraction_r = 1 - busy_r / makespan (max and mean over ranks)
//   zb_bubble_rate    = (span - work) / span for the rank with the longest span, where
//                       span = last compute end - first compute start on that rank
//   lower_bound       = max(max_r work_r, critical path of one microbatch)
struct Metrics {
  double makespan = 0.0;
  double zb_bubble_rate = 0.0;
  double bubble_fraction_max = 0.0;
  double bubble_fraction_mean = 0.0;
  double lower_bound = 0.0;
  double gap_to_lower_bound = 0.0;  // makespan / lower_bound - 1

  bool operator==(const Metrics&) const = default;
};

struct Timeline {
  TimelineSource source = TimelineSource::kSimulated;
  std::vector<RankTimeline> ranks;
  Metrics metrics;

  bool operator==(const Timeline&) const = default;
};

// The most any rank holds: static + activation memory (what a per-rank limit bounds), and
// activation memory alone; 0 for a timeline without ranks.
inline double PeakMemory(const Timeline& timeline) {
  double peak = 0.0;
  for (const RankTimeline& rank : timeline.ranks) peak = std::max(peak, rank.peak_memory);
  return peak;
}
inline double PeakActivationMemory(const Timeline& timeline) {
  double peak = 0.0;
  for (const RankTimeline& rank : timeline.ranks) {
    peak = std::max(peak, rank.peak_activation_memory);
  }
  return peak;
}

}  // namespace pipeplan
