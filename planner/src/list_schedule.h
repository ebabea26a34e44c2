// Deterministic list schedule of compute actions under a cost model: each rank runs its
// compute actions in order; one starts when the rank is free and its inputs have arrived
// (producer end + transfer time across ranks, free on the same rank). Shared by comm
// insertion (for the global message order) and the simulator (for the times).
#pragma once

#include <vector>

#include "pipeplan/planner/comm_insertion.h"
#include "pipeplan/planner/cost_model.h"
#include "pipeplan/planner/plan.h"
#include "pipeplan/planner/topology.h"

namespace pipeplan {

struct ScheduledCompute {
  double start = 0.0;
  double end = 0.0;
  double input_ready = 0.0;  // when the last cross-rank input arrived (0 if none)
};

struct ListScheduleResult {
  std::vector<std::vector<ScheduledCompute>> times;  // [rank][compute index]
  std::vector<ComputeRef> start_order;               // every action, in start order
};

// `compute` holds only compute actions. Fails naming the stuck ranks and actions if the
// order cannot finish (an input that is never produced, or produced later on the same rank).
StatusOr<ListScheduleResult> RunListSchedule(const ComputeOrder& compute, const StageMap& stages,
                                             int microbatches, const CostModel& costs);

}  // namespace pipeplan
