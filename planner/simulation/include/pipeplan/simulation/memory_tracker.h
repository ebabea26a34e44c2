// Activation memory accounting of one rank: F allocates when it starts; B releases all of it
// when it ends, I part of it and W the rest, but for what the backward leaves (its input
// gradient: MemoryModel::Retained), which the previous stage's backward releases where that
// stage is on the same rank (the gradient is handed over in memory); a gradient sent to another
// rank is released once its send completed, which takes the step's timing (the simulator calls
// Release); while an action runs it holds its transient on top. A stage whose gradients the
// runtime allocates anew each step (MemoryModel::Gradient) holds them from the end of its first
// B or W on. The change table is shared by the simulator and the solver so both count the
// same way (the solver counts those gradients as static: LargestFixed).
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// What F, B, I and W of every stage do to their rank's memory (MemoryModel::Change and
// Transient, and the hand-offs of the placement), looked up once: the trackers read it on
// every compute action.
class MemoryChangeTable {
 public:
  MemoryChangeTable(const MemoryModel& memory, const Topology& topology)
      : memory_(memory), stages_per_rank_(ChunksPerShare(topology)) {
    const int num_stages = std::max(topology.num_stages(), 0);
    cells_.resize(static_cast<size_t>(num_stages));
    handed_to_.assign(static_cast<size_t>(num_stages), 0.0);
    for (int s = 0; s < num_stages; ++s) {
      for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                                    ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
        cells_[s][static_cast<size_t>(kind)] = Compute(kind, StageId(s));
      }
    }
    messages_.resize(static_cast<size_t>(num_stages));
    for (int s = 0; s < num_stages; ++s) {
      const StageId stage(s);
      messages_[s] = {memory.Retained(stage, stages_per_rank_),
                      memory.ReceivedMessage(ActionKind::kRecvForward, stage, stages_per_rank_),
                      memory.ReceivedMessage(ActionKind::kRecvBackward, stage, stages_per_rank_)};
    }
    const StageMap map(topology);
    for (int s = 0; s + 1 < num_stages; ++s) {
      if (map.RankOf(StageId(s)) == map.RankOf(StageId(s + 1))) {
        handed_to_[s] = memory.Retained(StageId(s + 1), stages_per_rank_);
      }
    }
  }

  // What one compute part does to its rank's memory: its own MemoryModel::Change, and for a
  // backward (B or I) the gradient handed to it by the next stage on the same rank.
  double Change(const Action& part) const {
    const bool backward =
        part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput;
    return At(part).change - (backward ? HandedTo(part.stage) : 0.0);
  }
  // MemoryModel::Change alone (the solver holds the hand-off separately).
  double OwnChange(const Action& part) const { return At(part).change; }
  double Transient(const Action& part) const { return At(part).transient; }
  // The bytes of stage + 1's input gradient that `stage`'s backward frees (0 unless the two
  // stages share a rank).
  double HandedTo(StageId stage) const {
    const auto s = static_cast<size_t>(stage.value);
    return stage.value >= 0 && s < handed_to_.size() ? handed_to_[s] : 0.0;
  }

  double Gradient(StageId stage) const { return memory_.Gradient(stage); }

  // MemoryModel::Retained and ReceivedMessage of a stage that exists.
  double Retained(StageId stage) const { return messages_[Index(stage)].retained; }
  double ReceivedMessage(ActionKind recv, StageId stage) const {
    const Messages& m = messages_[Index(stage)];
    if (recv == ActionKind::kRecvForward) return m.received_input;
    return recv == ActionKind::kRecvBackward ? m.received_gradient : 0.0;
  }

  const MemoryModel& memory() const { return memory_; }
  int stages_per_rank() const { return stages_per_rank_; }

 private:
  static constexpr size_t kTabulatedKinds = 4;  // F, B, I and W come first in ActionKind

  struct Cell {
    double change = 0.0;
    double transient = 0.0;
  };

  struct Messages {
    double retained = 0.0;  // of the input gradient a backward sends
    double received_input = 0.0;
    double received_gradient = 0.0;
  };

  static size_t Index(StageId stage) { return static_cast<size_t>(stage.value); }
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
  std::vector<Messages> messages_;                        // [stage]
  std::vector<double> handed_to_;                         // [stage]
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
    for (const Action* part : ComputeParts(action)) {
      if (part->kind == ActionKind::kBackward || part->kind == ActionKind::kBackwardWeight) {
        AllocateGradients(part->stage);
      }
    }
  }

  // Between actions: `bytes` held no more (a sent gradient whose send completed).
  void Release(double bytes) { held_ = std::max(held_ - bytes, 0.0); }
  // Between actions: `bytes` held from now on (a receive's buffer, posted).
  void Hold(double bytes) {
    held_ += bytes;
    peak_ = std::max(peak_, held_);
  }

  double held() const { return held_; }
  // The most the action begun last holds while it runs, activations included.
  double top() const { return top_; }
  double peak() const { return peak_; }

 private:
  void AllocateGradients(StageId stage) {
    if (stage.value < 0) return;
    const auto s = static_cast<size_t>(stage.value);
    if (s >= gradients_held_.size()) gradients_held_.resize(s + 1, false);
    if (gradients_held_[s]) return;
    gradients_held_[s] = true;
    held_ += changes_.Gradient(stage);
    peak_ = std::max(peak_, held_);
  }

  const MemoryChangeTable& changes_;
  double held_ = 0.0;
  double top_ = 0.0;
  double peak_ = 0.0;
  std::vector<bool> gradients_held_;  // by stage: its gradients allocated this step
};

}  // namespace pipeplan
