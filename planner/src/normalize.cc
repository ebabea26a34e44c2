#include "pipeplan/planner/normalize.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/plannable.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/runtime_support.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan {
namespace {

StatusOr<PlannableStrategy> ShapeOf(const std::string& name) {
  if (std::optional<PlannableStrategy> strategy = FindPlannableStrategy(name)) return *strategy;
  return InvalidArgument("unknown strategy '" + name + "' (known: " + PlannableStrategyNames() +
                         ")");
}

Status CheckOptions(const PlanRequest& request, const PlannableStrategy& shape) {
  if (request.options.microbatch_group_size < 0) {
    return InvalidArgument("microbatch group size must be >= 1, got " +
                           std::to_string(request.options.microbatch_group_size));
  }
  if (request.options.microbatch_group_size > 0 && shape.setting != StrategySetting::kGroupSizes) {
    return InvalidArgument("options.microbatch_group_size applies to " + GroupSizeStrategyNames() +
                           " only, not " + request.strategy);
  }
  if (request.options.post_validation && !SupportsPostValidation(request.strategy)) {
    return InvalidArgument("options.post_validation applies to the zero-bubble family (" +
                           PostValidationStrategyNames() + "), not " + request.strategy);
  }
  if (const std::optional<double>& order = request.options.order_limit; order.has_value()) {
    if (!shape.orders_under_limit) {
      return InvalidArgument(
          "options.order_limit applies to the strategies that order under a memory limit of "
          "their own (" +
          OrderLimitStrategyNames() + "), not " + request.strategy);
    }
    if (!(*order > 0.0)) {
      return InvalidArgument("options.order_limit must be > 0 (inf: none), got " +
                             FormatNumber(*order));
    }
  }
  return CheckRunsOn(request.runtime, request.strategy, request.topology.placement,
                     request.options.post_validation);
}

std::string CutNote(const CostModel& costs, const MemoryModel& memory, const Topology& topology,
                    std::string_view strategy) {
  const size_t given = std::max(costs.stages.size(), memory.stages.size());
  const int given_chains = std::max({1, costs.chains, memory.chains});
  std::string line = "the " + std::to_string(given) + " per-stage entries of the costs";
  if (given_chains == 2) line += " (two model copies: the first one read)";
  line += " were cut by depth into the " + std::to_string(topology.num_stages()) + " stages of " +
          std::string(strategy) + " at V=" + std::to_string(topology.stages_per_rank);
  if (ChainsOf(topology) == 2) line += " (two model copies, each the whole model)";
  return line + " (an estimate: profile a plan with that V to measure them)";
}

// Whether `memory` has static figures measured on another number of ranks than `topology`'s.
bool StaticMeasuredElsewhere(const MemoryModel& memory, const Topology& topology) {
  const size_t measured = memory.static_by_rank.size();
  return measured > 0 && measured != static_cast<size_t>(topology.ranks);
}

std::string StaticByRankNote(const MemoryModel& given, const MemoryModel& fitted,
                             const Topology& topology, std::string_view strategy) {
  return "the static memory measured on " + std::to_string(given.static_by_rank.size()) +
         " ranks counts its largest, " + given.Describe(fitted.static_per_rank) +
         ", for each of the " + std::to_string(topology.ranks) + " ranks of " +
         std::string(strategy) + ": an upper bound (profile at that P to measure each)";
}

}  // namespace

StatusOr<FittedFigures> FitFigures(const CostModel& costs, const MemoryModel& memory,
                                   const Topology& topology, std::string_view strategy) {
  PIPEPLAN_ASSIGN_OR_RETURN(StageFigures fitted, FitStageFigures(costs, memory, topology));
  FittedFigures out{std::move(fitted.costs), std::move(fitted.memory), false, {}};
  out.cut = !FitsAsGiven(costs, memory, topology);
  if (out.cut) out.notes.push_back(CutNote(costs, memory, topology, strategy));
  if (StaticMeasuredElsewhere(memory, topology)) {
    out.notes.push_back(StaticByRankNote(memory, out.memory, topology, strategy));
  }
  return out;
}

void TakeMemoryFromCosts(PlanRequest& request) {
  if (!request.costs.memory.has_value()) return;
  const std::optional<double> limit = request.memory.limit;
  request.memory = *std::move(request.costs.memory);
  request.costs.memory.reset();
  if (limit.has_value()) request.memory.limit = limit;
}

void SplitRankShare(PlanRequest& request) {
  const bool share = request.figures == FigureScope::kRankShare;
  request.figures = FigureScope::kStage;
  if (!share || HasPerStageFigures(request)) return;
  const int chunks = ChunksPerShare(request.topology);
  request.costs = SplitShareCosts(std::move(request.costs), chunks);
  request.memory = SplitShareMemory(std::move(request.memory), chunks);
}

PlanRequest MakeRankShare(PlanRequest request) {
  const bool stage = request.figures == FigureScope::kStage;
  request.figures = FigureScope::kRankShare;
  if (!stage || HasPerStageFigures(request)) return request;
  const int given_v = std::max(1, request.topology.stages_per_rank);
  request.costs = ShareOfStageCosts(std::move(request.costs), given_v);
  request.memory = ShareOfStageMemory(std::move(request.memory), given_v);
  return request;
}

StatusOr<std::vector<std::string>> RecostPlan(Plan& plan, CostModel costs) {
  PlanRequest& request = plan.request;
  request.costs = std::move(costs);
  // The file's own limit is not the plan's.
  const std::optional<double> limit = request.memory.limit;
  TakeMemoryFromCosts(request);
  request.memory.limit = limit;
  const std::string_view strategy =
      plan.provenance.strategy.empty() ? request.strategy : plan.provenance.strategy;
  PIPEPLAN_ASSIGN_OR_RETURN(FittedFigures fitted,
                            FitFigures(request.costs, request.memory, request.topology, strategy));
  request.costs = std::move(fitted.costs);
  request.memory = std::move(fitted.memory);
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(request.costs, request.topology.num_stages()));
  return std::move(fitted.notes);
}

Status CheckRequestModels(const PlanRequest& request) {
  const int stages = request.topology.num_stages();
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(request.costs, stages));
  PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(request.memory, stages));
  return ValidateStaticByRank(request.memory, request.topology.ranks);
}

StatusOr<NormalizedRequest> Normalize(PlanRequest request) {
  PIPEPLAN_ASSIGN_OR_RETURN(const PlannableStrategy shape, ShapeOf(request.strategy));
  TakeMemoryFromCosts(request);
  request.topology.placement = shape.placement;
  // V = 0 means "the strategy's own": 1, or 2 for the interleaved and V-shaped ones.
  if (request.topology.stages_per_rank == 0) {
    request.topology.stages_per_rank = std::max(1, shape.min_stages_per_rank);
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckStagesPerRank(request.strategy, shape.min_stages_per_rank,
                                              shape.max_stages_per_rank, request.topology));
  PIPEPLAN_RETURN_IF_ERROR(CheckOptions(request, shape));
  SplitRankShare(request);
  NormalizedRequest out;
  // Per-stage figures written for another cut of the model are cut again by depth.
  if (HasPerStageFigures(request)) {
    PIPEPLAN_ASSIGN_OR_RETURN(FittedFigures fitted, FitFigures(request.costs, request.memory,
                                                               request.topology, request.strategy));
    request.costs = std::move(fitted.costs);
    request.memory = std::move(fitted.memory);
    out.figures_cut = fitted.cut;
    out.notes = std::move(fitted.notes);
  }
  // What the runtime does with an F&B cell is what it costs there.
  if (RunsCellsInTurn(request.runtime)) {
    for (StageCosts& stage : request.costs.stages) stage.overlap = 0.0;
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckRequestModels(request));
  out.request = std::move(request);
  return out;
}

}  // namespace pipeplan
