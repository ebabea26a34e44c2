// Builds small plans and timelines by hand, action by action with made-up times, for the
// exporter tests: they must not depend on the planner or the simulator.
#pragma once

#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan::testing {

inline Action Compute(ActionKind kind, int stage, int mb) {
  return MakeCompute(kind, StageId(stage), MicrobatchId(mb));
}

inline Action Comm(ActionKind kind, int stage, int mb, int peer, bool rollback = false) {
  Action action = MakeCompute(kind, StageId(stage), MicrobatchId(mb));
  action.peer = RankId(peer);
  action.rollback = rollback;
  return action;
}

struct Timed {
  Action action;
  double start;
  double end;
};

// Appends the next rank: its program and, index-aligned, its timings.
inline void AddRank(Plan& plan, Timeline& timeline, const std::vector<Timed>& entries) {
  const int rank = static_cast<int>(plan.programs.size());
  RankProgram program;
  program.rank = RankId(rank);
  RankTimeline rank_timeline;
  rank_timeline.rank = RankId(rank);
  for (const Timed& entry : entries) {
    program.actions.push_back(entry.action);
    rank_timeline.actions.push_back({entry.start, entry.end});
  }
  plan.programs.push_back(std::move(program));
  timeline.ranks.push_back(std::move(rank_timeline));
}

struct HandMadePlan {
  Plan plan;
  Timeline timeline;
};

}  // namespace pipeplan::testing
