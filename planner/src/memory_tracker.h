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
      if (part->kind == ActionKind::kForward)
        held_ += memory_.Activation(part->stage, stages_per_rank_);
    }
    peak_ = std::max(peak_, held_);
  }
  void End(const Action& action) {
    for (const Action* part : ComputeParts(action)) held_ -= Released(*part);
    held_ = std::max(held_, 0.0);  // guards float drift only
  }

  double held() const { return held_; }
  double peak() const { return peak_; }

 private:
  double Released(const Action& part) const {
    const double activation = memory_.Activation(part.stage, stages_per_rank_);
    const double by_input = memory_.FreedByInput(part.stage, stages_per_rank_);
    switch (part.kind) {
      case ActionKind::kBackward:
        return activation;
      case ActionKind::kBackwardInput:
        return by_input;
      case ActionKind::kBackwardWeight:
        return activation - by_input;
      case ActionKind::kForward:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return 0.0;
    }
    return 0.0;
  }

  const MemoryModel& memory_;
  int stages_per_rank_;
  double held_ = 0.0;
  double peak_ = 0.0;
};

}  // namespace pipeplan
