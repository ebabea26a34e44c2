// Checks a compute order: every (stage, microbatch) has one F and one B or one I + W pair, on
// the rank that owns the stage, F before I/B before W. Errors name rank, action index and action.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// `program_index`, when given, maps compute index -> index in the full program (for messages).
Status CheckComputeOrder(const Topology& topology, const ComputeView& order,
                         const std::vector<std::vector<size_t>>* program_index);

}  // namespace pipeplan
