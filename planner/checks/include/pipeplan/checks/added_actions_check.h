// The checks of what comm insertion and post-validation add to a compute order. The planner
// runs them on its own plans, whose compute order it checked before anything was added (both
// passes leave compute actions as they are): ValidatePlan without a second compute-order check.
#pragma once

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// Programs in rank order, one per rank; comm, post-validation and the dry run as ValidatePlan.
Status ValidateAddedActions(const Plan& plan);

}  // namespace pipeplan
