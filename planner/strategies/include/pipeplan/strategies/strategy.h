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

// What `auto` tries of a strategy besides its V range, and the option that setting is.
enum class StrategySetting {
  kNone,
  kGroupSizes,   // options.microbatch_group_size (interleaved-1f1b), P to 4P
  kMemorySteps,  // options.order_limit, whole activations up to the asked limit (zb)
};

// A strategy and every trait the planner, auto and compare read of it: nothing about a
// strategy is looked up by its name elsewhere.
struct Strategy {
  std::string_view name;
  std::string_view summary;  // one line for --help and reports
  Placement placement;
  int min_stages_per_rank;  // V range the strategy accepts
  int max_stages_per_rank;  // 0 = no upper bound
  GenerateFn generate;
  SmallestLimitFn smallest_limit = nullptr;  // nullptr: the strategy ignores a memory limit
  bool post_validation = false;              // the zero-bubble family: PV can be inserted
  StrategySetting setting = StrategySetting::kNone;
};

// Every strategy, in catalogue order (the order `compare` prints them), registered ones last.
const std::vector<Strategy>& AllStrategies();
// nullptr when unknown.
const Strategy* FindStrategy(std::string_view name);

// Adds a strategy to the catalogue (after the built-in ones): plan, compare, auto and every
// --help list it from then on. For tests and extensions, before any planning starts: not
// thread-safe against concurrent readers. Fails on an empty or taken name, no generator, a
// V range that is empty, or a full catalogue (pointers FindStrategy gave stay valid).
Status RegisterStrategy(const Strategy& strategy);

// Whether `strategy` is a catalogue strategy that takes post-validation.
bool SupportsPostValidation(std::string_view strategy);
// "zb-h1, zb-h2, ...": the strategies that take post-validation, in catalogue order.
std::string PostValidationStrategyNames();
// "zb, zb-1p, ...": the strategies that order under a memory limit of their own
// (options.order_limit applies to them).
std::string OrderLimitStrategyNames();
// "interleaved-1f1b": the strategies whose setting is the microbatch group size.
std::string GroupSizeStrategyNames();
// Comma-separated names, "auto" last, for error messages and --help.
std::string StrategyNames();

// Whether `strategy` can plan `topology` (V range); the message says why not.
Status CheckApplicable(const Strategy& strategy, const Topology& topology);
// The same check for any strategy's V range (max 0: no upper bound).
Status CheckStagesPerRank(std::string_view strategy, int min_stages_per_rank,
                          int max_stages_per_rank, const Topology& topology);

}  // namespace pipeplan
