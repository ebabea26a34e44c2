// Small helpers over actions and programs shared by passes, validator and simulator.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/planner/plan.h"

namespace pipeplan {

// The compute parts of an action: its sub-actions for an overlap cell, else itself.
inline std::vector<const Action*> ComputeParts(const Action& action) {
  std::vector<const Action*> parts;
  if (action.kind == ActionKind::kOverlapFB) {
    for (const Action& sub : action.sub_actions) parts.push_back(&sub);
  } else {
    parts.push_back(&action);
  }
  return parts;
}

// "rank 2, action 17 (3B5)": the prefix of every error about one action.
inline std::string Where(int rank, size_t index, const Action& action) {
  return "rank " + std::to_string(rank) + ", action " + std::to_string(index) + " (" +
         ToString(action) + ")";
}

// Compute actions of every program, in order, and their indices in the full program.
struct ComputeView {
  ComputeOrder order;
  std::vector<std::vector<size_t>> program_index;  // [rank][compute index] -> action index
};

inline ComputeView ExtractCompute(const std::vector<RankProgram>& programs) {
  ComputeView view;
  view.order.resize(programs.size());
  view.program_index.resize(programs.size());
  for (size_t r = 0; r < programs.size(); ++r) {
    const std::vector<Action>& actions = programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsCompute(actions[i].kind)) continue;
      view.order[r].push_back(actions[i]);
      view.program_index[r].push_back(i);
    }
  }
  return view;
}

}  // namespace pipeplan
