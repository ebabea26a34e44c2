// Plan validation, also run on every imported plan: completeness, dependency order,
// stage ownership, send/recv pairing per rank pair, and a rendezvous dry run that must
// finish. Errors name the rank, the action index and the action.
#pragma once

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Checks a compute-only order: every (stage, mb) has one F and one B or one I+W pair, on
// the rank that owns the stage, F before I/B before W.
Status ValidateComputeOrder(const ComputeOrder& order, const Topology& topology);

// Everything but the dry run: topology, compute order, comm endpoints, pairing and data flow,
// post-validation. Enough to make a plan safe to simulate.
Status ValidateStructure(const Plan& plan);

// Full check of a plan with comm actions: ValidateStructure, then the dry run.
Status ValidatePlan(const Plan& plan);

// Dry run under the strictest semantics (each maximal run of comm actions is one group that
// completes only when all its transfers are matched). Fails naming the ranks and actions
// that wait on each other.
Status DryRun(const Plan& plan);

}  // namespace pipeplan
