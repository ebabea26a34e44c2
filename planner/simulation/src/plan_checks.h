// What every simulation of a plan checks first: the simulators trust a plan's meaning
// (ValidatePlan checks it) but never its sizes or indices.
#pragma once

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"

namespace pipeplan {

// The topology, costs and memory model fit each other and the plan's programs; every stage,
// microbatch and neighbour an action names exists.
Status CheckSimulatable(const Plan& plan, const CostModel& costs, const MemoryModel& memory);

}  // namespace pipeplan
