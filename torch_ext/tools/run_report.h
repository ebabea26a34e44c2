// What a pipeplan-torch run writes and prints once its steps are done: the timeline,
// profile, metrics and picture it was asked for, then a summary (step time, memory, the
// profile's split check, the gradients' fate).
#pragma once

#include <cstdint>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/torch_ext/step_metrics.h"
#include "rank_exchange.h"
#include "run_options.h"

namespace pipeplan::torch_ext {

inline constexpr double kMicroseconds = 1e-6;  // the timelines' unit

// B alone, for the profile of a plan that splits its backwards: set beside the I + W its
// steps measured, the median of this many microbatches.
inline constexpr int kReferenceRepetitions = 5;

// When the measured steps ran, in microseconds: without the step barrier what each added to
// the run; each one's start on the run's clock (empty where no clock of the run timed them).
struct StepTimes {
  std::vector<double> added;
  std::vector<double> starts;
};

// `steps`: the measured steps; `records[r]`: rank r's step records; `undo_bytes`: by rank,
// where this process knows them; `full_backwards`: B alone by stage (a split plan's profile).
Status Report(const Plan& plan, const Options& o, const std::vector<Timeline>& steps,
              const std::vector<std::vector<StepRecord>>& records,
              const std::vector<int64_t>& undo_bytes, const FullBackwards& full_backwards,
              StepTimes times);

}  // namespace pipeplan::torch_ext
