#include "pipeplan/planner/planner.h"

#include <algorithm>
#include <string>
#include <utility>

#include "pipeplan/checks/added_actions_check.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/passes/comm_insertion.h"
#include "pipeplan/passes/post_validation.h"
#include "pipeplan/passes/scheduled_passes.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/optimal.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/strategy.h"

#ifndef PIPEPLAN_VERSION
#define PIPEPLAN_VERSION "0.0.0"
#endif

namespace pipeplan {
namespace {

std::string OptionsSummary(const PlanRequest& request) {
  const Topology& t = request.topology;
  std::string summary = "P=" + std::to_string(t.ranks) + " V=" + std::to_string(t.stages_per_rank) +
                        " M=" + std::to_string(t.microbatches) +
                        " placement=" + std::string(PlacementName(t.placement));
  if (request.options.microbatch_group_size > 0) {
    summary += " group=" + std::to_string(request.options.microbatch_group_size);
  }
  if (request.options.post_validation) summary += " post_validation";
  if (request.memory.limit.has_value()) {
    summary += " memory_limit=" + FormatNumber(*request.memory.limit);
  }
  return summary;
}

Provenance ProvenanceOf(const PlanRequest& request) {
  Provenance provenance;
  provenance.tool_version = std::string(PIPEPLAN_VERSION);
  provenance.strategy = request.strategy;
  provenance.options = OptionsSummary(request);
  return provenance;
}

// The limit holds where the simulated peak of every rank does. Memory takes the timing too (a
// gradient sent to another rank is freed once it landed there), so the plan is simulated with
// its own costs: from `schedule`, its compute's list schedule, where the caller has it.
Status CheckMemoryLimit(const Plan& plan, const ListScheduleResult* schedule) {
  const MemoryModel& memory = plan.request.memory;
  if (!memory.limit.has_value()) return Status::Ok();
  Timeline timeline;
  if (schedule != nullptr) {
    timeline = SimulateScheduled(plan, plan.request.costs, memory, *schedule);
  } else {
    PIPEPLAN_ASSIGN_OR_RETURN(timeline, Simulate(plan));
  }
  for (const RankTimeline& rank : timeline.ranks) {
    if (rank.peak_memory > *memory.limit * (1 + 1e-12)) {
      return FailedPrecondition(plan.request.strategy + " needs " +
                                memory.Describe(rank.peak_memory) + " memory on rank " +
                                std::to_string(rank.rank.value) + ", above the memory limit " +
                                memory.Describe(*memory.limit));
    }
  }
  return Status::Ok();
}

Status CheckRequestModels(const PlanRequest& request) {
  const int stages = request.topology.num_stages();
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(request.costs, stages));
  PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(request.memory, stages));
  return ValidateStaticByRank(request.memory, request.topology.ranks);
}

}  // namespace

std::string_view ToolVersion() { return PIPEPLAN_VERSION; }

bool HasPerStageFigures(const PlanRequest& request) {
  return request.costs.stages.size() > 1 || request.costs.boundaries.size() > 1 ||
         request.memory.stages.size() > 1;
}

namespace {

// What NormalizeRequest needs of a strategy, from the catalogue or the solver-made ones.
struct StrategyShape {
  Placement placement;
  int min_stages_per_rank;
  int max_stages_per_rank;
};

StatusOr<StrategyShape> ShapeOf(const std::string& name) {
  if (const Strategy* strategy = FindStrategy(name); strategy != nullptr) {
    return StrategyShape{strategy->placement, strategy->min_stages_per_rank,
                         strategy->max_stages_per_rank};
  }
  if (const OptimalStrategy* optimal = FindOptimalStrategy(name); optimal != nullptr) {
    return StrategyShape{optimal->placement, optimal->min_stages_per_rank,
                         optimal->max_stages_per_rank};
  }
  return InvalidArgument("unknown strategy '" + name + "' (known: " + PlannableStrategyNames() +
                         ")");
}

}  // namespace

StatusOr<PlanRequest> NormalizeRequest(PlanRequest request) {
  PIPEPLAN_ASSIGN_OR_RETURN(const StrategyShape shape, ShapeOf(request.strategy));
  request.topology.placement = shape.placement;
  // V = 0 means "the strategy's own": 1, or 2 for the interleaved and V-shaped ones.
  if (request.topology.stages_per_rank == 0) {
    request.topology.stages_per_rank = std::max(1, shape.min_stages_per_rank);
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckStagesPerRank(request.strategy, shape.min_stages_per_rank,
                                              shape.max_stages_per_rank, request.topology));
  if (request.options.microbatch_group_size < 0) {
    return InvalidArgument("microbatch group size must be >= 1, got " +
                           std::to_string(request.options.microbatch_group_size));
  }
  if (request.options.microbatch_group_size > 0 && request.strategy != "interleaved-1f1b") {
    return InvalidArgument("options.microbatch_group_size applies to interleaved-1f1b only, not " +
                           request.strategy);
  }
  if (request.options.post_validation && !SupportsPostValidation(request.strategy)) {
    return InvalidArgument(
        "options.post_validation applies to the zero-bubble family (zb, zb-1p, zb-2p, zb-h1, "
        "zb-h2, interleaved-zb, zbv, zbv-handcrafted, v-half, v-min), not " +
        request.strategy);
  }
  // Per-stage figures written for another cut of the model are cut again by depth.
  if (HasPerStageFigures(request)) {
    PIPEPLAN_ASSIGN_OR_RETURN(StageFigures fitted,
                              FitStageFigures(request.costs, request.memory, request.topology));
    request.costs = std::move(fitted.costs);
    request.memory = std::move(fitted.memory);
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckRequestModels(request));
  return request;
}

namespace {

// BuildPlanFromOrder that also hands back the list schedule of the plan's compute order.
StatusOr<Plan> BuildScheduledPlan(const PlanRequest& request, ComputeOrder order,
                                  ListScheduleResult& schedule) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckRequestModels(request));
  PIPEPLAN_RETURN_IF_ERROR(ValidateComputeOrder(order, request.topology));
  const StageMap stages(request.topology);
  Plan plan;
  plan.request = request;
  PIPEPLAN_ASSIGN_OR_RETURN(plan.programs,
                            InsertComm(std::move(order), stages, request.costs, schedule));
  if (request.options.post_validation) {
    PIPEPLAN_ASSIGN_OR_RETURN(plan.programs, InsertPostValidation(std::move(plan.programs), stages,
                                                                  request.costs, schedule));
  }
  plan.provenance = ProvenanceOf(request);
  // The compute order was checked above and the passes keep it as it is.
  Status valid = ValidateAddedActions(plan);
  if (!valid.ok()) return Internal("the planner produced an invalid plan: " + valid.message());
  PIPEPLAN_RETURN_IF_ERROR(CheckMemoryLimit(plan, &schedule));
  return plan;
}

// A strategy's plan (not "auto"), with its list schedule.
StatusOr<Plan> BuildStrategyPlan(const PlanRequest& raw_request, ListScheduleResult& schedule) {
  PIPEPLAN_ASSIGN_OR_RETURN(PlanRequest request, NormalizeRequest(raw_request));
  const StageMap stages(request.topology);
  const Strategy* strategy = FindStrategy(request.strategy);
  PIPEPLAN_ASSIGN_OR_RETURN(ComputeOrder order, strategy->generate(request, stages));
  return BuildScheduledPlan(request, std::move(order), schedule);
}

// The solver-made strategies need a solver, which this layer does not run.
Status RefuseSolverMade(const PlanRequest& request) {
  if (FindOptimalStrategy(request.strategy) == nullptr) return Status::Ok();
  return InvalidArgument(request.strategy +
                         " is made by a constraint solver, which BuildPlan does not run: "
                         "BuildOptimalPlan plans it (as 'pipeplan plan' does)");
}

}  // namespace

StatusOr<Plan> BuildPlan(const PlanRequest& request) {
  PIPEPLAN_RETURN_IF_ERROR(RefuseSolverMade(request));
  if (request.strategy == kAutoStrategy) {
    PIPEPLAN_ASSIGN_OR_RETURN(AutoResult result, AutoSearch(request));
    return std::move(result.best);
  }
  ListScheduleResult schedule;
  return BuildStrategyPlan(request, schedule);
}

StatusOr<Plan> BuildPlanFromOrder(const PlanRequest& request, ComputeOrder order) {
  ListScheduleResult schedule;
  return BuildScheduledPlan(request, std::move(order), schedule);
}

StatusOr<Plan> BuildPlanFromPrograms(const PlanRequest& request,
                                     std::vector<RankProgram> programs) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckRequestModels(request));
  Plan plan;
  plan.request = request;
  plan.programs = std::move(programs);
  plan.provenance = ProvenanceOf(request);
  PIPEPLAN_RETURN_IF_ERROR(ValidatePlan(plan));
  PIPEPLAN_RETURN_IF_ERROR(CheckMemoryLimit(plan, nullptr));
  return plan;
}

StatusOr<PlanRequest> AtSmallestLimit(PlanRequest request) {
  request.memory.limit.reset();
  const Strategy* strategy = FindStrategy(request.strategy);
  if (strategy == nullptr || strategy->smallest_limit == nullptr) return request;
  PIPEPLAN_ASSIGN_OR_RETURN(const PlanRequest normalized, NormalizeRequest(request));
  PIPEPLAN_ASSIGN_OR_RETURN(request.memory.limit,
                            strategy->smallest_limit(normalized, StageMap(normalized.topology)));
  return request;
}

StatusOr<SimulatedPlan> BuildAndSimulatePlan(const PlanRequest& request) {
  PIPEPLAN_RETURN_IF_ERROR(RefuseSolverMade(request));
  SimulatedPlan out;
  if (request.strategy == kAutoStrategy) {
    PIPEPLAN_ASSIGN_OR_RETURN(out.plan, BuildPlan(request));
    PIPEPLAN_ASSIGN_OR_RETURN(out.timeline, Simulate(out.plan));
    return out;
  }
  ListScheduleResult schedule;
  PIPEPLAN_ASSIGN_OR_RETURN(out.plan, BuildStrategyPlan(request, schedule));
  out.timeline =
      SimulateScheduled(out.plan, out.plan.request.costs, out.plan.request.memory, schedule);
  return out;
}

}  // namespace pipeplan
