// Profile: what measured steps of a plan say about its costs, in seconds: per stage and compute
// kind the distribution of durations, per stage boundary the transfer times. BuildProfile
// (measurement/build_profile.h) makes one from measured Timelines; Calibrate
// (measurement/calibrate.h) turns it into a CostModel.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan {

// The distribution of one measured duration, in seconds. samples = 0: nothing was measured,
// and every figure is 0. mean = 0 with samples > 0: a profile written before the mean was
// recorded.
struct DurationStats {
  int samples = 0;
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  double p10 = 0.0;
  double p90 = 0.0;
  double mean = 0.0;

  bool operator==(const DurationStats&) const = default;
};

// Memory of one stage's compute, in bytes, from timelines that counted bytes (RankTimeline's
// memory_unit; DurationStats holds the same quantiles, of bytes here). Kept or freed: the
// change from an action's start to its end; transient: its peak above the larger of the two.
// F&B overlap cells are left out (their halves' memory is not told apart).
struct StageMemoryProfile {
  DurationStats kept_by_forward;
  DurationStats freed_by_backward;
  DurationStats freed_by_input;
  DurationStats freed_by_weight;
  DurationStats forward_transient;
  DurationStats backward_transient;
  DurationStats input_transient;
  DurationStats weight_transient;
  // What one RECV_F / RECV_B of the stage allocates for its message (0 where the runtime
  // did not count receives).
  DurationStats received_forward;
  DurationStats received_backward;
  // Bytes the stage holds from step to step (parameters, gradients, optimizer state, data),
  // the median over the steps; 0 where the runtime did not tell them. Of them, the model's
  // inputs (first stage) and the loss's targets (last stage), each the median.
  double static_bytes = 0.0;
  double input_bytes = 0.0;
  double target_bytes = 0.0;
  // The stage's parameter gradients where the job frees them between steps (set_to_none): its
  // first backward of a step allocates them. The median over the steps; 0: static or not told.
  double gradient_bytes = 0.0;
  // The stage's microbatches per step in the profiled plan, which its data scale with (0: not
  // told, then the stage may hold no data).
  int microbatches = 0;

  bool operator==(const StageMemoryProfile&) const = default;
};

// Compute durations of one stage, by kind, and its memory where measured.
struct StageProfile {
  DurationStats forward;
  DurationStats backward;
  DurationStats backward_input;
  DurationStats backward_weight;
  // F&B overlap cells count for the stage of their forward half (in every plan pipeplan
  // builds or imports, the cell's own stage, which CostModel::ComputeTime prices it on).
  DurationStats overlap;
  StageMemoryProfile memory = {};

  bool operator==(const StageProfile&) const = default;
};

// Transfers across the boundary between stage s and s + 1, in both directions (activations
// s -> s + 1, gradients back). A transfer is measured from the send's start to the end of its
// receive, and only when the receive was posted no later than the send started: the receive's
// end is then when the data landed. A receive posted after the send started ends when the
// receiver got there plus whatever remained, which says nothing clean about the wire, so
// those transfers are only counted (late_receives). A late receive posted when its data had
// landed (at least the median clean transfer after its send started; with no clean transfer
// none counts) gives its duration, post to end, to receive_overhead: what a receive takes by
// itself (Calibrate takes the mean).
struct BoundaryProfile {
  DurationStats transfer;
  int late_receives = 0;
  // Where a profiler could fit them (a transfer timeline alone cannot: every message of a
  // boundary has the same size); 0 = not measured. Seconds, bytes per second, bytes.
  double latency = 0.0;
  double bandwidth = 0.0;
  double activation_bytes = 0.0;
  DurationStats receive_overhead;
  // The two stages share a rank: no transfers, and the later stage's input gradient is handed
  // to the earlier one in memory, so the earlier one's backward frees it (its freed figures
  // include it; Calibrate gives it back to the later stage).
  bool same_rank = false;

  bool operator==(const BoundaryProfile&) const = default;
};

struct Profile {
  std::string source;  // what was measured: "synthetic", "torch cpu", a device name, ...
  int steps = 0;       // measured steps the figures come from
  std::vector<StageProfile> stages;         // one per stage, index = stage
  std::vector<BoundaryProfile> boundaries;  // index s: stage s <-> s + 1; S - 1 entries
  // Per rank, bytes held when its first compute of a step began (parameters, gradients,
  // optimizer state, data), the median over the steps; empty where memory was not counted.
  std::vector<double> static_bytes = {};
  // Per rank, static_bytes less its stages' own (StageMemoryProfile::static_bytes): what stays
  // with the rank wherever the stages go. Empty where the runtime did not tell the stages'.
  std::vector<double> own_static_bytes = {};
  // The copies of the model the stages are: 2 where the profiled plan had a dual placement
  // (dualpipe: stages P..2P-1 the second copy); 0 or 1: one.
  int chains = 0;
  // The plan that ran ("1f1b P=2 V=1 M=8"): calibrating profiles of different plans of one
  // model together says which run measured each figure. Empty: not told.
  std::string plan = {};

  bool operator==(const Profile&) const = default;
};

// Checks what would mislead a consumer: counts >= 0, figures finite and >= 0, quantiles in
// order (min <= p10 <= median <= p90 <= max), a mean in [min, max] (or 0: not recorded),
// S - 1 boundary entries for S stages (none for one stage); memory changes finite (they may be
// negative), transients and static bytes >= 0. Errors name the field ("stages[2].backward.p90",
// "stages[1].memory.kept_by_forward.median").
Status ValidateProfile(const Profile& profile);

}  // namespace pipeplan
