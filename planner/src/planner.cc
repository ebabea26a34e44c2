#include "pipeplan/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/checks/added_actions_check.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/passes/comm_insertion.h"
#include "pipeplan/passes/scheduled_passes.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/optimal.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/runtime_support.h"
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
  if (request.runtime != Runtime::kAny) {
    summary += " runtime=" + std::string(RuntimeName(request.runtime));
  }
  if (request.memory.limit.has_value()) {
    summary += " memory_limit=" + FormatNumber(*request.memory.limit);
  }
  if (const std::optional<double>& order = request.options.order_limit; order.has_value()) {
    summary += " order_limit=" + (std::isinf(*order) ? "none" : FormatNumber(*order));
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
// gradient sent to another rank is freed once it landed there), so `timeline` is the plan's
// under its own costs.
Status CheckMemoryLimit(const Plan& plan, const Timeline& timeline) {
  const MemoryModel& memory = plan.request.memory;
  if (!memory.limit.has_value()) return Status::Ok();
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

}  // namespace

std::string_view ToolVersion() { return PIPEPLAN_VERSION; }

bool HasPerStageFigures(const PlanRequest& request) {
  return request.costs.stages.size() > 1 || request.costs.boundaries.size() > 1 ||
         request.memory.stages.size() > 1;
}

namespace {

// EvaluateOrder that also hands back the list schedule of the plan's compute order. The plan is
// simulated from that schedule, once: the memory limit's check needs the timeline, and so do
// most callers.
StatusOr<Evaluated> BuildScheduledPlan(const PlanRequest& request, ComputeOrder order,
                                       ListScheduleResult& schedule) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckRequestModels(request));
  PIPEPLAN_RETURN_IF_ERROR(ValidateComputeOrder(order, request.topology));
  const StageMap stages(request.topology);
  Plan plan;
  plan.request = request;
  // torch's runtime cannot start a receive before the compute ahead of it ends: post it when
  // its data is sent, not at its consumer (comm_insertion.h).
  const ReceivePlacement receives = IsTorchScheduleRuntime(request.runtime)
                                        ? ReceivePlacement::kWhenSent
                                        : ReceivePlacement::kBeforeConsumer;
  PIPEPLAN_ASSIGN_OR_RETURN(
      plan.programs, InsertComm(std::move(order), stages, request.costs, schedule, receives));
  if (request.options.post_validation) {
    PIPEPLAN_ASSIGN_OR_RETURN(plan.programs, InsertPostValidation(std::move(plan.programs), stages,
                                                                  request.costs, schedule));
  }
  plan.provenance = ProvenanceOf(request);
  // The compute order was checked above and the passes keep it as it is.
  Status valid = ValidateAddedActions(plan);
  if (!valid.ok()) return Internal("the planner produced an invalid plan: " + valid.message());
  Timeline timeline = SimulateScheduled(plan, request.costs, request.memory, schedule);
  PIPEPLAN_RETURN_IF_ERROR(CheckMemoryLimit(plan, timeline));
  return Evaluated{std::move(plan), std::move(timeline)};
}

// The end of the plan's last compute action in its list schedule.
double LastComputeEnd(const ListScheduleResult& schedule) {
  double end = 0.0;
  for (int rank = 0; rank < schedule.num_ranks(); ++rank) {
    for (const ScheduledCompute& compute : schedule.Rank(rank)) end = std::max(end, compute.end);
  }
  return end;
}

// One stage's activation at its largest: the scale of the raises of a strategy's limit.
double LargestStageActivation(const PlanRequest& request) {
  double largest = 0.0;
  for (int stage = 0; stage < request.topology.num_stages(); ++stage) {
    largest = std::max(largest,
                       request.memory.Activation(StageId(stage), request.topology.stages_per_rank));
  }
  return largest;
}

// The limits a strategy is told to order under besides the asked one: above it by a quarter
// of a stage activation at a time up to two, then doubling up to every activation of a step
// held; then none (+infinity: the strategy's own default), so that a limit its unlimited plan
// fits never makes the plan slower.
std::vector<double> RaisedLimits(const PlanRequest& request) {
  const double asked = *request.memory.limit;
  const double activation = LargestStageActivation(request);
  std::vector<double> limits;
  if (activation > 0.0) {
    for (int quarters = 1; quarters <= 8; ++quarters) {
      limits.push_back(asked + quarters / 4.0 * activation);
    }
    const int most = 2 * request.topology.microbatches * request.topology.stages_per_rank;
    for (int whole = 4; whole <= most; whole *= 2) limits.push_back(asked + whole * activation);
  }
  limits.push_back(std::numeric_limits<double>::infinity());
  return limits;
}

// A strategy that plans under a memory limit keeps to it by its own count, which bounds the
// simulated peak from above (the largest static memory of any rank, the largest transient and
// every gradient it may retain, with each F), so its plan can leave part of the limit unused
// (docs/planning.md, "memory limit", has a measured case). The simulated peak is what the
// limit binds, so the strategy also orders under raised limits (RaisedLimits) and the fastest
// plan that fits the asked one is kept. Where the count is every rank's (the default model),
// a raised limit lets it plan above the asked one, which the check refuses: none is tried, so
// that such plans and their planning time stay as they were. `request` is normalised.
std::vector<double> OrderLimitsAboveNormalized(const PlanRequest& request,
                                               const Strategy& strategy) {
  if (strategy.smallest_limit == nullptr || !request.memory.limit.has_value() ||
      request.options.order_limit.has_value() ||
      request.memory.LargestFixedIsEveryRanks(StageMap(request.topology))) {
    return {};
  }
  return RaisedLimits(request);
}

// The strategy's order under `limit` (+infinity: its own default) instead of the request's,
// planned and checked against the request's limit.
StatusOr<Evaluated> OrderedUnder(const PlanRequest& request, const StageMap& stages,
                                 const Strategy& strategy, double limit,
                                 ListScheduleResult& schedule) {
  const std::optional<double> order_limit =
      std::isinf(limit) ? std::nullopt : std::optional<double>(limit);
  StatusOr<ComputeOrder> order = [&] {
    if (order_limit == request.memory.limit) return strategy.generate(request, stages);
    PlanRequest ordering = request;
    ordering.memory.limit = order_limit;
    return strategy.generate(ordering, stages);
  }();
  if (!order.ok()) return order.status();
  return BuildScheduledPlan(request, *std::move(order), schedule);
}

// A strategy's plan (not "auto") and its timeline, with what Normalize estimated: ordered
// under the request's limit (or its order_limit), and where OrderLimitsAboveNormalized gives
// raised ones, the fastest of those orders that fits the request's limit, also where the
// greedy is stuck under the asked limit itself (its count is above the simulated peak). The
// greedy passes are not monotone in the limit, hence every raise is tried. Where none fits,
// the error is the order's under the asked limit.
StatusOr<Evaluated> BuildStrategyPlan(const PlanRequest& raw_request) {
  PIPEPLAN_ASSIGN_OR_RETURN(NormalizedRequest normalized, Normalize(raw_request));
  const PlanRequest& request = normalized.request;
  const StageMap stages(request.topology);
  const Strategy& strategy = *FindStrategy(request.strategy);
  ListScheduleResult schedule;
  StatusOr<Evaluated> best =
      OrderedUnder(request, stages, strategy,
                   request.options.order_limit.value_or(
                       request.memory.limit.value_or(std::numeric_limits<double>::infinity())),
                   schedule);
  double best_end = best.ok() ? LastComputeEnd(schedule) : 0.0;
  for (const double limit : OrderLimitsAboveNormalized(request, strategy)) {
    PlanRequest raised = request;  // the plan records the limit its order was made under
    raised.options.order_limit = limit;
    StatusOr<Evaluated> candidate = OrderedUnder(raised, stages, strategy, limit, schedule);
    if (!candidate.ok()) continue;  // stuck under this limit, or above the asked one
    if (const double end = LastComputeEnd(schedule); !best.ok() || end < best_end) {
      best_end = end;
      best = std::move(candidate);
    }
  }
  if (!best.ok()) return best.status();
  best->notes = std::move(normalized.notes);
  return best;
}

// auto and the solver-made strategies are MakePlan's (make_plan.h): a search, a solver.
Status RefuseNotCatalogue(const PlanRequest& request) {
  if (request.strategy == kAutoStrategy) {
    return InvalidArgument("auto is a search over the catalogue, which MakePlan runs");
  }
  if (FindOptimalStrategy(request.strategy) == nullptr) return Status::Ok();
  return InvalidArgument(request.strategy +
                         " is made by a constraint solver, which BuildPlan does not run: "
                         "MakePlan plans it with a solver (as 'pipeplan plan' does)");
}

}  // namespace

StatusOr<Plan> BuildPlan(const PlanRequest& request) {
  PIPEPLAN_ASSIGN_OR_RETURN(Evaluated built, BuildAndSimulatePlan(request));
  return std::move(built.plan);
}

StatusOr<Evaluated> EvaluateOrder(const PlanRequest& request, ComputeOrder order) {
  ListScheduleResult schedule;
  return BuildScheduledPlan(request, std::move(order), schedule);
}

StatusOr<Plan> BuildPlanFromOrder(const PlanRequest& request, ComputeOrder order) {
  PIPEPLAN_ASSIGN_OR_RETURN(Evaluated built, EvaluateOrder(request, std::move(order)));
  return std::move(built.plan);
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
  if (plan.request.memory.limit.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const Timeline timeline, Simulate(plan));
    PIPEPLAN_RETURN_IF_ERROR(CheckMemoryLimit(plan, timeline));
  }
  return plan;
}

StatusOr<std::vector<double>> OrderLimitsAbove(const PlanRequest& request) {
  PIPEPLAN_ASSIGN_OR_RETURN(const NormalizedRequest normalized, Normalize(request));
  const Strategy* strategy = FindStrategy(normalized.request.strategy);
  if (strategy == nullptr) return std::vector<double>{};
  return OrderLimitsAboveNormalized(normalized.request, *strategy);
}

StatusOr<PlanRequest> AtSmallestLimit(PlanRequest request) {
  request.memory.limit.reset();
  request.options.order_limit.reset();
  const Strategy* strategy = FindStrategy(request.strategy);
  if (strategy == nullptr || strategy->smallest_limit == nullptr) return request;
  PIPEPLAN_ASSIGN_OR_RETURN(const NormalizedRequest normalized, Normalize(request));
  PIPEPLAN_ASSIGN_OR_RETURN(
      request.memory.limit,
      strategy->smallest_limit(normalized.request, StageMap(normalized.request.topology)));
  return request;
}

std::optional<std::string> StepEndNote(const Plan& plan) {
  if (plan.request.topology.placement != Placement::kDual) return std::nullopt;
  return plan.request.strategy +
         "'s step ends with each rank r and rank P-1-r adding each other's gradients of their "
         "two stages (the two model copies' sum): the makespan leaves it out, as a measured "
         "timeline's does (first action to last)";
}

StatusOr<Evaluated> BuildAndSimulatePlan(const PlanRequest& request) {
  PIPEPLAN_RETURN_IF_ERROR(RefuseNotCatalogue(request));
  return BuildStrategyPlan(request);
}

}  // namespace pipeplan
