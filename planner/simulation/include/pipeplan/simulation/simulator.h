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

// Counts the simulations run on the constructing thread while it lives (the planner hands a
// plan's timeline on instead of simulating the plan again; tests hold it to that). Nests: an
// inner count is not added to the outer one's.
class SimulationCount {
 public:
  SimulationCount();
  ~SimulationCount();
  SimulationCount(const SimulationCount&) = delete;
  SimulationCount& operator=(const SimulationCount&) = delete;

  int value() const { return value_; }

 private:
  friend class SimulationCounted;
  int value_ = 0;
  SimulationCount* outer_;
};

// max(per-rank work, critical path of one microbatch through all stages). The timeline's
// metrics take the larger of this and a solver's proven bound (Provenance::proven_bound) when
// simulating with the plan's own costs.
double LowerBound(const Plan& plan, const CostModel& costs);

// The timeline's metrics again after the plan's provenance gained a solver's proven bound,
// which the lower bound takes (the times themselves do not change).
void RefreshLowerBound(const Plan& plan, Timeline& timeline);

}  // namespace pipeplan
