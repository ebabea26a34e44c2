// Comparing two timelines of one plan (typically simulated vs measured): step time, per-rank
// busy and idle time, and the start error of every compute action, overall and per kind.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

struct RankDiff {
  RankId rank;
  double busy_expected = 0.0;
  double busy_actual = 0.0;
  double idle_expected = 0.0;  // makespan - busy
  double idle_actual = 0.0;
  double peak_memory_expected = 0.0;  // each timeline's memory_unit
  double peak_memory_actual = 0.0;
};

// Compute actions (F, B, I, W, overlap cells) and PV of one kind.
struct KindDiff {
  ActionKind kind = ActionKind::kForward;
  int count = 0;
  double mean_duration_expected = 0.0;
  double mean_duration_actual = 0.0;
  double mean_start_error = 0.0;      // actual - expected, signed
  double mean_abs_start_error = 0.0;  // |actual - expected|
};

struct OpStartError {
  RankId rank;
  size_t action_index = 0;
  double expected = 0.0;
  double actual = 0.0;
};

struct TimelineDiff {
  double step_expected = 0.0;  // makespan
  double step_actual = 0.0;
  double relative_error = 0.0;  // actual / expected - 1
  std::vector<RankDiff> ranks;
  std::vector<KindDiff> kinds;  // kinds present, in ActionKind order
  double mean_abs_start_error = 0.0;
  std::optional<OpStartError> worst_start;  // the compute action whose start is furthest off
  // Both timelines count memory in bytes (a simulation with a memory model in bytes, a
  // measurement that counted them), so their peaks compare.
  bool memory_in_bytes = false;
};

// Both timelines must be of `plan` (one entry per action of every rank).
StatusOr<TimelineDiff> DiffTimelines(const Plan& plan, const Timeline& expected,
                                     const Timeline& actual);

}  // namespace pipeplan
