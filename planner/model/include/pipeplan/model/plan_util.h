// Small helpers over actions and programs shared by passes, checks, simulation and reports.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/plan.h"

namespace pipeplan {

// The compute parts of an action: its sub-actions for an overlap cell, else itself. A small
// fixed-size range: it sits on every hot path, so it must not allocate.
class ComputePartRange {
 public:
  explicit ComputePartRange(const Action& action) {
    if (action.kind != ActionKind::kOverlapFB) {
      parts_[size_++] = &action;
      return;
    }
    for (const Action& sub : action.sub_actions) {
      if (size_ < kMaxParts) parts_[size_++] = &sub;
    }
  }
  const Action* const* begin() const { return parts_; }
  const Action* const* end() const { return parts_ + size_; }

 private:
  static constexpr int kMaxParts = 2;  // an overlap cell is {F, B}; the validator rejects more
  const Action* parts_[kMaxParts] = {nullptr, nullptr};
  int size_ = 0;
};

inline ComputePartRange ComputeParts(const Action& action) { return ComputePartRange(action); }

// Compute actions of every program, in order (pointers into the programs), and their
// indices in the full program.
struct ProgramComputeView {
  std::vector<std::vector<const Action*>> order;
  std::vector<std::vector<size_t>> program_index;  // [rank][compute index] -> action index
};

inline ProgramComputeView ExtractCompute(const std::vector<RankProgram>& programs) {
  ProgramComputeView view;
  view.order.resize(programs.size());
  view.program_index.resize(programs.size());
  for (size_t r = 0; r < programs.size(); ++r) {
    const std::vector<Action>& actions = programs[r].actions;
    // Compute is a fraction of the program: reserving the whole size touches no extra page.
    view.order[r].reserve(actions.size());
    view.program_index[r].reserve(actions.size());
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsCompute(actions[i].kind)) continue;
      view.order[r].push_back(&actions[i]);
      view.program_index[r].push_back(i);
    }
  }
  return view;
}

// Per rank, pointers to its compute actions in order (they stay owned by a plan or order).
using ComputeView = std::vector<std::vector<const Action*>>;

inline ComputeView ViewOf(const ComputeOrder& order) {
  ComputeView view(order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    view[r].reserve(order[r].size());
    for (const Action& action : order[r]) view[r].push_back(&action);
  }
  return view;
}

// Whether a program holds an optimizer post-validation (PV) action; a plan has post-validation
// when any of its programs does (a valid plan then has it on every rank).
inline bool HasPostValidation(const RankProgram& program) {
  for (const Action& a : program.actions) {
    if (a.kind == ActionKind::kPostValidation) return true;
  }
  return false;
}
inline bool HasPostValidation(const Plan& plan) {
  for (const RankProgram& program : plan.programs) {
    if (HasPostValidation(program)) return true;
  }
  return false;
}

// Number of receives tagged rollback in a plan.
inline int CountRollbackReceives(const Plan& plan) {
  int count = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& a : program.actions) count += a.rollback ? 1 : 0;
  }
  return count;
}

}  // namespace pipeplan
