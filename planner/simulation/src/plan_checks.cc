#include "plan_checks.h"

#include <string>

#include "pipeplan/model/plan_util.h"

namespace pipeplan {
namespace {

Status CheckSizes(const Plan& plan, const CostModel& costs, const MemoryModel& memory) {
  const Topology& topology = plan.request.topology;
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(topology));
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(costs, topology.num_stages()));
  PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(memory, topology.num_stages()));
  PIPEPLAN_RETURN_IF_ERROR(ValidateStaticByRank(memory, topology.ranks));
  if (static_cast<int>(plan.programs.size()) != topology.ranks) {
    return InvalidArgument("the plan has " + std::to_string(plan.programs.size()) +
                           " rank programs but the topology has " + std::to_string(topology.ranks) +
                           " ranks");
  }
  return Status::Ok();
}

Status OutOfRange(int rank, size_t index, const Action& action, const std::string& what) {
  return InvalidArgument(Where(rank, index, action) + ": " + what +
                         " (run the validator: pipeplan "
                         "validates plans before simulating them)");
}

// Simulating trusts the plan's meaning (ValidatePlan checks it) but never its indices: every
// stage, microbatch and neighbour the simulator looks up must exist.
Status CheckIndices(const Plan& plan) {
  const StageMap stages(plan.request.topology);
  auto stage_ok = [&](StageId s) { return s.value >= 0 && s.value < stages.num_stages(); };
  auto mb_ok = [&](const Action& a) {
    return a.microbatch.value >= 0 && a.microbatch.value < stages.MicrobatchesOf(a.stage);
  };
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const int rank = static_cast<int>(r);
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (IsCompute(a.kind)) {
        for (const Action* part : ComputeParts(a)) {
          if (!stage_ok(part->stage) || !mb_ok(*part))
            return OutOfRange(rank, i, a, "stage or microbatch out of range");
        }
        continue;
      }
      switch (a.kind) {
        case ActionKind::kSendForward:
        case ActionKind::kRecvBackward:
          if (!stage_ok(a.stage) || !mb_ok(a) || stages.IsLast(a.stage)) {
            return OutOfRange(rank, i, a, "no next stage to exchange with");
          }
          break;
        case ActionKind::kRecvForward:
        case ActionKind::kSendBackward:
          if (!stage_ok(a.stage) || !mb_ok(a) || stages.IsFirst(a.stage)) {
            return OutOfRange(rank, i, a, "no previous stage to exchange with");
          }
          break;
        case ActionKind::kForward:
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight:
        case ActionKind::kOverlapFB:
        case ActionKind::kPostValidation:
        case ActionKind::kSendPostValidation:
        case ActionKind::kRecvPostValidation:
          break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckSimulatable(const Plan& plan, const CostModel& costs, const MemoryModel& memory) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSizes(plan, costs, memory));
  return CheckIndices(plan);
}

}  // namespace pipeplan
