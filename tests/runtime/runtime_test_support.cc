#include "runtime_test_support.h"

#include <algorithm>

#include "pipeplan/strategies/strategy.h"

namespace pipeplan::runtime::testing {

std::vector<StrategyCase> AllStrategyCases() {
  std::vector<StrategyCase> cases;
  for (const Strategy& strategy : AllStrategies()) cases.push_back({std::string(strategy.name)});
  for (const Strategy& strategy : AllStrategies()) {
    if (strategy.post_validation) cases.push_back({std::string(strategy.name), true});
  }
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<StrategyCase>& info) {
  std::string name = info.param.strategy + (info.param.post_validation ? "_pv" : "");
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

PlanRequest RuntimeRequest(const StrategyCase& c, int ranks, int microbatches, double latency) {
  const Strategy* strategy = FindStrategy(c.strategy);
  PlanRequest request;
  request.strategy = c.strategy;
  request.options.post_validation = c.post_validation;
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  request.topology.stages_per_rank =
      strategy != nullptr && strategy->min_stages_per_rank > 1 ? strategy->min_stages_per_rank : 1;
  const int stages = ranks * request.topology.stages_per_rank;
  request.costs.stages.clear();
  for (int s = 0; s < stages; ++s) {
    // F = I = W = 1.0, 1.1 or 1.2 by stage, B = I + W: every op within a factor 2.4 of every
    // other, and stages differ so that a wrong wait shows.
    const double unit = 1.0 + 0.1 * (s % 3);
    request.costs.stages.push_back({unit, 2 * unit, unit, unit, 0.0});
  }
  request.costs.boundaries = {BoundaryCosts{latency, 0, 0}};
  if (c.strategy == "zb") request.memory.limit = 1.5 * ranks;
  return request;
}

Action Compute(ActionKind kind, int stage, int mb) {
  return MakeCompute(kind, StageId(stage), MicrobatchId(mb));
}

Action Comm(ActionKind kind, int stage, int mb, int peer) {
  Action action = Compute(kind, stage, mb);
  action.peer = RankId(peer);
  return action;
}

Plan BuildOrFail(const PlanRequest& request) {
  StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : Plan{};
}

PlanRequest SmallRequest(const std::string& strategy, int ranks, int stages_per_rank,
                         bool post_validation) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = 2 * ranks;
  request.options.post_validation = post_validation;
  return request;
}

SyntheticWithState::SyntheticWithState(const Plan& plan, RankId rank,
                                       const SyntheticOptions& options)
    : inner_(plan, rank, options), rank_(rank), states_(plan.request.topology.ranks) {}

StatusOr<std::span<std::byte>> SyntheticWithState::GradientStateBuffer(RankId rank,
                                                                       const OpContext& context) {
  if (rank.value < 0 || rank.value >= static_cast<int>(states_.size())) {
    return InvalidArgument("no rank " + std::to_string(rank.value));
  }
  // The step's first ask: the previous step's sends are done (op_executor.h), so the rows
  // may be cleared, and what EndStep sees is this step's exchange alone.
  if (context.step != cleared_for_step_) {
    std::fill(states_.begin(), states_.end(), std::array<double, 2>{-1, -1});
    cleared_for_step_ = context.step;
  }
  std::array<double, 2>& state = states_[rank.value];
  if (rank == rank_) state = {double(rank_.value), double(context.step)};
  return std::span<std::byte>(std::as_writable_bytes(std::span(state)));
}

}  // namespace pipeplan::runtime::testing
