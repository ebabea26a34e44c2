#include "pipeplan/planner/plannable.h"

#include "pipeplan/planner/optimal.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {

std::vector<PlannableStrategy> PlannableStrategies() {
  std::vector<PlannableStrategy> out;
  for (const Strategy& strategy : AllStrategies()) {
    out.push_back({strategy.name, strategy.summary, strategy.placement,
                   strategy.min_stages_per_rank, strategy.max_stages_per_rank, strategy.setting,
                   /*solver_made=*/false, strategy.smallest_limit != nullptr});
  }
  for (const OptimalStrategy& strategy : OptimalStrategies()) {
    out.push_back({strategy.name, strategy.summary, strategy.placement,
                   strategy.min_stages_per_rank, strategy.max_stages_per_rank,
                   StrategySetting::kNone, /*solver_made=*/true});
  }
  return out;
}

std::optional<PlannableStrategy> FindPlannableStrategy(std::string_view name) {
  for (const PlannableStrategy& strategy : PlannableStrategies()) {
    if (strategy.name == name) return strategy;
  }
  return std::nullopt;
}

std::string PlannableStrategyNames() {
  std::string names;
  for (const PlannableStrategy& strategy : PlannableStrategies()) {
    names += std::string(strategy.name) + ", ";
  }
  return names + std::string(kAutoStrategy);
}

}  // namespace pipeplan
