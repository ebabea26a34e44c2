// List schedule of compute actions under a cost model: each rank runs its compute actions in
// order; one starts when the rank is free and its inputs have arrived (producer end +
// transfer time across ranks, free on the same rank). The times do not depend on the order
// ranks are visited in, so a plain worklist computes them. Shared by comm insertion (for the
// global message order) and the simulator (for the times).
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
  // 1 + the largest depth among the action's inputs and its predecessor on the rank: any
  // producer has a smaller depth than its consumer, which breaks ties between equal times.
  int depth = 0;
};

struct ListScheduleResult {
  std::vector<std::vector<ScheduledCompute>> times;  // [rank][compute index]
};

// Every compute action ordered by (end, start, depth, rank): a linear extension of all
// dependencies and of every rank's order.
std::vector<ComputeRef> CompletionOrder(const ListScheduleResult& schedule);

// Per rank, pointers to its compute actions in order (they stay owned by a plan or order).
using ComputeView = std::vector<std::vector<const Action*>>;

ComputeView ViewOf(const ComputeOrder& order);

// `compute` holds only compute actions. Fails naming the stuck ranks and actions if the
// order cannot finish (an input that is never produced, or produced later on the same rank).
StatusOr<ListScheduleResult> RunListSchedule(const ComputeView& compute, const StageMap& stages,
                                             const CostModel& costs);

}  // namespace pipeplan
