// Activation memory accounting of one rank: F allocates when it starts; B releases all of it
// when it ends, I part of it and W the rest. Shared by the simulator and the planner's limit
// check so both count the same way.
#pragma once

#include <algorithm>

#include "pipeplan/planner/action.h"
#include "pipeplan/planner/memory_model.h"
#include "plan_util.h"

namespace pipeplan {

class RankMemoryTracker {
 public:
  RankMemoryTracker(const MemoryModel& memory, int stages_per_rank)
      : memory_(memory), stages_per_rank_(stages_per_rank) {}

  // Call at the start of a compute action, then at its end.
  void Start(const Action& action) {
    for (const Action* part : ComputeParts(action)) {
      const double change = memory_.Change(part->kind, part->stage, stages_per_rank_);
      if (change > 0) held_ += change;
    }
    peak_ = std::max(peak_, held_);
  }
  void End(const Action& action) {
    for (const Action* part : ComputeParts(action)) {
      const double change = memory_.Change(part->kind, part->stage, stages_per_rank_);
      if (change < 0) held_ += change;
    }
    held_ = std::max(held_, 0.0);  // guards float drift only
  }

  double held() const { return held_; }
  double peak() const { return peak_; }

 private:
  const MemoryModel& memory_;
  int stages_per_rank_;
  double held_ = 0.0;
  double peak_ = 0.0;
};

}  // namespace pipeplan
