// Activation memory accounting of one rank: F allocates when it starts; B releases all of it
// when it ends, I part of it and W the rest; while an action runs it holds its transient on
// top. Shared by the simulator and the planner's limit check so both count the same way.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan_util.h"

namespace pipeplan {

// What F, B, I and W of every stage do to their rank's memory (MemoryModel::Change and
// Transient), looked up once: the trackers read it on every compute action.
class MemoryChangeTable {
 public:
  MemoryChangeTable(const MemoryModel& memory, int stages_per_rank, int num_stages)
      : memory_(memory), stages_per_rank_(stages_per_rank) {
    cells_.resize(static_cast<size_t>(std::max(num_stages, 0)));
    for (int s = 0; s < num_stages; ++s) {
      for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                                    ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
        cells_[s][static_cast<size_t>(kind)] = Compute(kind, StageId(s));
      }
    }
  }

  // MemoryModel::Change and Transient of one compute part.
  double Change(const Action& part) const { return At(part).change; }
  double Transient(const Action& part) const { return At(part).transient; }

  const MemoryModel& memory() const { return memory_; }

 private:
  static constexpr size_t kTabulatedKinds = 4;  // F, B, I and W come first in ActionKind

  struct Cell {
    double change = 0.0;
    double transient = 0.0;
  };

  Cell Compute(ActionKind kind, StageId stage) const {
    return {memory_.Change(kind, stage, stages_per_rank_), memory_.Transient(kind, stage)};
  }
  Cell At(const Action& part) const {
    const auto kind = static_cast<size_t>(part.kind);
    const int s = part.stage.value;
    if (kind < kTabulatedKinds && s >= 0 && s < static_cast<int>(cells_.size())) {
      return cells_[s][kind];
    }
    return Compute(part.kind, part.stage);
  }

  const MemoryModel& memory_;
  int stages_per_rank_;
  std::vector<std::array<Cell, kTabulatedKinds>> cells_;  // [stage][kind]
};

class RankMemoryTracker {
 public:
  explicit RankMemoryTracker(const MemoryChangeTable& changes) : changes_(changes) {}

  // Call at the start of a compute action, then at its end. An F&B cell's halves run in turn:
  // the larger of their transients counts.
  void Start(const Action& action) {
    double transient = 0.0;
    for (const Action* part : ComputeParts(action)) {
      const double change = changes_.Change(*part);
      if (change > 0) held_ += change;
      transient = std::max(transient, changes_.Transient(*part));
    }
    top_ = held_ + transient;
    peak_ = std::max(peak_, top_);
  }
  void End(const Action& action) {
    for (const Action* part : ComputeParts(action)) {
      const double change = changes_.Change(*part);
      if (change < 0) held_ += change;
    }
    held_ = std::max(held_, 0.0);  // guards float drift only
  }

  double held() const { return held_; }
  // The most the action begun last holds while it runs, activations included.
  double top() const { return top_; }
  double peak() const { return peak_; }

 private:
  const MemoryChangeTable& changes_;
  double held_ = 0.0;
  double top_ = 0.0;
  double peak_ = 0.0;
};

}  // namespace pipeplan
