// List schedule of compute actions under a cost model: each rank runs its compute actions in
// order; one starts when the rank is free and its inputs have arrived (producer end +
// transfer time across ranks, free on the same rank) and its receives are done (a receive
// takes at least its boundary's receive overhead from the end of the rank's previous compute,
// where comm insertion posts it; a RECV posted earlier is charged as if posted there). The times do
// not depend on the order ranks are visited in, so a plain worklist computes them. Shared by comm
// insertion (for the global message order), post-validation (for its PV times) and the simulator
// (for the times).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/passes/comm_insertion.h"

namespace pipeplan {

struct ScheduledCompute {
  double start = 0.0;
  double end = 0.0;
  // 1 + the largest depth among the action's inputs and its predecessor on the rank: any
  // producer has a smaller depth than its consumer, which breaks ties between equal times.
  int depth = 0;
};

// Times of every compute action, all ranks in one flat array (rank r's compute actions are
// `Rank(r)`, in order).
class ListScheduleResult {
 public:
  ListScheduleResult() = default;
  explicit ListScheduleResult(std::vector<size_t> offsets)
      : offsets_(std::move(offsets)), times_(offsets_.back()) {}

  int num_ranks() const { return static_cast<int>(offsets_.size()) - 1; }
  std::span<const ScheduledCompute> Rank(int rank) const {
    return {times_.data() + offsets_[rank], offsets_[rank + 1] - offsets_[rank]};
  }
  const ScheduledCompute& At(int rank, size_t index) const {
    return times_[offsets_[rank] + index];
  }
  ScheduledCompute& At(int rank, size_t index) { return times_[offsets_[rank] + index]; }
  size_t size() const { return times_.size(); }

 private:
  std::vector<size_t> offsets_ = {0};  // rank r: [offsets_[r], offsets_[r + 1])
  std::vector<ScheduledCompute> times_;
};

// Every compute action ordered by (end, start, depth, rank): a linear extension of all
// dependencies and of every rank's order.
std::vector<ComputeRef> CompletionOrder(const ListScheduleResult& schedule);

// `compute` holds only compute actions. Fails naming the stuck ranks and actions if the
// order cannot finish (an input that is never produced, or produced later on the same rank).
StatusOr<ListScheduleResult> RunListSchedule(const ComputeView& compute, const StageMap& stages,
                                             const CostModel& costs);

}  // namespace pipeplan
