// The strategy catalogue: each strategy turns (topology, options, costs) into a per-rank
// compute order. One file per strategy under planner/strategies/src/.
#pragma once

#include <string_view>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

using GenerateFn = StatusOr<ComputeOrder> (*)(const PlanRequest& request, const StageMap& stages);
// For strategies that plan under request.memory.limit: the smallest limit (per rank, static
// included) with which `generate` plans the request. The limit in `request` is ignored.
using SmallestLimitFn = StatusOr<double> (*)(const PlanRequest& request, const StageMap& stages);

struct Strategy {
  std::string_view name;
  std::string_view summary;  // one line for --help and reports
  Placement placement;
  int min_stages_per_rank;  // V range the strategy accepts
  int max_stages_per_rank;  // 0 = no upper bound
  GenerateFn generate;
  SmallestLimitFn smallest_limit = nullptr;  // nullptr: the strategy ignores a memory limit
};

// Every strategy, in catalogue order (the order `compare` prints them).
const std::vector<Strategy>& AllStrategies();
// nullptr when unknown.
const Strategy* FindStrategy(std::string_view name);
// Comma-separated names, "auto" last, for error messages and --help.
std::string StrategyNames();

// Whether `strategy` can plan `topology` (V range); the message says why not.
Status CheckApplicable(const Strategy& strategy, const Topology& topology);
// The same check for any strategy's V range (max 0: no upper bound).
Status CheckStagesPerRank(std::string_view strategy, int min_stages_per_rank,
                          int max_stages_per_rank, const Topology& topology);

}  // namespace pipeplan
