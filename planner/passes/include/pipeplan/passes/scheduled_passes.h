// The passes BuildPlan chains, sharing one list schedule: the schedule depends only on the
// compute order and the costs, and comm insertion leaves the compute order as it is, so
// post-validation and the simulation of the plan under the same costs reuse the one comm
// insertion ran instead of running their own.
#pragma once

#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/passes/list_schedule.h"

namespace pipeplan {

// InsertComm that also hands back the list schedule of `order` under `costs`, placing receives
// as `placement` says.
StatusOr<std::vector<RankProgram>> InsertComm(
    ComputeOrder order, const StageMap& stages, const CostModel& costs,
    ListScheduleResult& schedule, ReceivePlacement placement = ReceivePlacement::kBeforeConsumer);

// InsertPostValidation on programs whose compute order has `schedule` under `costs`.
StatusOr<std::vector<RankProgram>> InsertPostValidation(std::vector<RankProgram> programs,
                                                        const StageMap& stages,
                                                        const CostModel& costs,
                                                        const ListScheduleResult& schedule);

// Simulate on a valid plan whose compute order has `schedule` under `costs`.
Timeline SimulateScheduled(const Plan& plan, const CostModel& costs, const MemoryModel& memory,
                           const ListScheduleResult& schedule);

}  // namespace pipeplan
