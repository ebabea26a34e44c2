// Every strategy `plan` takes, the catalogue's and the solver-made ones alike, with the traits
// a request needs before any plan is made: placement, V range, the setting auto sweeps. One
// lookup, so that front ends and Normalize never ask two registries and join the answers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/topology.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan {

struct PlannableStrategy {
  std::string_view name;
  std::string_view summary;  // one line for --help
  Placement placement;
  int min_stages_per_rank;
  int max_stages_per_rank;  // 0 = no upper bound
  StrategySetting setting = StrategySetting::kNone;
  bool solver_made = false;         // optimal, optimal-v, optimal-fb: made by CP-SAT, not generated
  bool orders_under_limit = false;  // Strategy::smallest_limit: options.order_limit applies
};

// The catalogue in its order (registered strategies included), then the solver-made ones.
std::vector<PlannableStrategy> PlannableStrategies();
// nullopt when `name` is neither (auto is not a strategy: it chooses one).
std::optional<PlannableStrategy> FindPlannableStrategy(std::string_view name);
// Every name `plan` takes, comma-separated, auto last.
std::string PlannableStrategyNames();

}  // namespace pipeplan
