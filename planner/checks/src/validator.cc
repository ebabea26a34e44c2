// Plan validation: the public entry points; each check lives in its own file.
#include "pipeplan/checks/validator.h"

#include <string>

#include "comm_check.h"
#include "compute_order_check.h"
#include "pipeplan/checks/added_actions_check.h"
#include "pipeplan/model/plan_util.h"
#include "post_validation_check.h"

namespace pipeplan {

Status ValidateComputeOrder(const ComputeOrder& order, const Topology& topology) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(topology));
  return CheckComputeOrder(topology, ViewOf(order), nullptr);
}

Status ValidatePlan(const Plan& plan) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateStructure(plan));
  return DryRun(plan);
}

namespace {

Status CheckProgramsMatchTopology(const Plan& plan) {
  const Topology& topology = plan.request.topology;
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(topology));
  if (static_cast<int>(plan.programs.size()) != topology.ranks) {
    return InvalidArgument("the plan has " + std::to_string(plan.programs.size()) +
                           " rank programs but the topology has " + std::to_string(topology.ranks) +
                           " ranks");
  }
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    if (plan.programs[r].rank.value != static_cast<int>(r)) {
      return InvalidArgument("program " + std::to_string(r) + " is labelled rank " +
                             std::to_string(plan.programs[r].rank.value) +
                             "; programs must be in rank order");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateStructure(const Plan& plan) {
  PIPEPLAN_RETURN_IF_ERROR(CheckProgramsMatchTopology(plan));
  const ProgramComputeView view = ExtractCompute(plan.programs);
  PIPEPLAN_RETURN_IF_ERROR(
      CheckComputeOrder(plan.request.topology, view.order, &view.program_index));
  PIPEPLAN_RETURN_IF_ERROR(CheckComm(plan));
  return CheckPostValidation(plan);
}

Status ValidateAddedActions(const Plan& plan) {
  PIPEPLAN_RETURN_IF_ERROR(CheckProgramsMatchTopology(plan));
  PIPEPLAN_RETURN_IF_ERROR(CheckComm(plan));
  PIPEPLAN_RETURN_IF_ERROR(CheckPostValidation(plan));
  return DryRun(plan);
}

}  // namespace pipeplan
