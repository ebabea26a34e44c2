// Simulator: predicts when every action of a plan runs, per-rank busy time and memory, and
// the step metrics (docs/planning.md §4). Pure and deterministic.
#pragma once

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// The plan is taken as valid (ValidatePlan; BuildPlan's plans are): an invalid one gives
// meaningless times or an error, never a crash.
// Simulates with the plan's own request costs and memory model.
StatusOr<Timeline> Simulate(const Plan& plan);
// Simulates the plan's order under other costs (e.g. calibrated ones).
StatusOr<Timeline> Simulate(const Plan& plan, const CostModel& costs, const MemoryModel& memory);

// max(per-rank work, critical path of one microbatch through all stages). The timeline's
// metrics take the larger of this and a solver's proven bound (Provenance::proven_bound) when
// simulating with the plan's own costs.
double LowerBound(const Plan& plan, const CostModel& costs);

}  // namespace pipeplan
