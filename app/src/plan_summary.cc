#include "pipeplan/app/plan_summary.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/topology.h"

namespace pipeplan::app {

std::string PlanStrategyName(const Plan& plan) {
  return plan.provenance.strategy.empty() ? plan.request.strategy : plan.provenance.strategy;
}

size_t PerStageEntries(const CostModel& costs, const MemoryModel& memory) {
  return std::max(costs.stages.size(), memory.stages.size());
}

std::string CutFiguresLine(const CostModel& costs, const MemoryModel& memory, const Plan& plan) {
  const size_t given = PerStageEntries(costs, memory);
  const Topology& topology = plan.request.topology;
  const auto stages = static_cast<size_t>(topology.num_stages());
  if (FitsAsGiven(costs, memory, topology)) return "";
  const int given_chains = std::max({1, costs.chains, memory.chains});
  const int chains = ChainsOf(topology);
  std::string line = "the " + std::to_string(given) + " per-stage entries of the costs";
  if (given_chains == 2) line += " (two model copies: the first one read)";
  line += " were cut by depth into the " + std::to_string(stages) + " stages of " +
          PlanStrategyName(plan) + " at V=" + std::to_string(topology.stages_per_rank);
  if (chains == 2) line += " (two model copies, each the whole model)";
  return line + " (an estimate: profile a plan with that V to measure them)";
}

std::string StaticByRankLine(const MemoryModel& memory, const Plan& plan) {
  const std::vector<double>& by_rank = memory.static_by_rank;
  const int ranks = plan.request.topology.ranks;
  if (by_rank.empty() || by_rank.size() == static_cast<size_t>(ranks)) return "";
  return "the static memory measured on " + std::to_string(by_rank.size()) +
         " ranks counts its largest, " + memory.Describe(plan.request.memory.static_per_rank) +
         ", for each of the " + std::to_string(ranks) + " ranks of " + PlanStrategyName(plan) +
         ": an upper bound (profile at that P to measure each)";
}

PostValidationSummary SummarizePostValidation(const Plan& plan) {
  PostValidationSummary summary;
  for (const RankProgram& program : plan.programs) {
    const bool has_pv =
        std::any_of(program.actions.begin(), program.actions.end(),
                    [](const Action& a) { return a.kind == ActionKind::kPostValidation; });
    summary.ranks_with_pv += has_pv ? 1 : 0;
  }
  summary.rollback_receives = CountRollbackReceives(plan);
  return summary;
}

std::string PostValidationLine(const Plan& plan) {
  const PostValidationSummary pv = SummarizePostValidation(plan);
  if (pv.ranks_with_pv == 0 && pv.rollback_receives == 0) return "";
  const int ranks = static_cast<int>(plan.programs.size());
  std::string where = "every rank";
  if (pv.ranks_with_pv != ranks) {
    where = std::to_string(pv.ranks_with_pv) + " of " + std::to_string(ranks) + " ranks";
  }
  return "post-validation: PV on " + where + ", " + std::to_string(pv.rollback_receives) +
         (pv.rollback_receives == 1 ? " receive" : " receives") + " tagged rollback";
}

}  // namespace pipeplan::app
