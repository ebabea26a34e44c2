// Helpers for the runtime tests: every strategy case (the zero-bubble family twice, with and
// without post-validation) and requests for them at the size.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::runtime::testing {

struct StrategyCase {
  std::string strategy;
  bool post_validation = false;
};

// Every strategy, plus the zero-bubble family again with post-validation.
std::vector<StrategyCase> AllStrategyCases();
std::string CaseName(const ::testing::TestParamInfo<StrategyCase>& info);

// P ranks, M microbatches, V = 2 where the strategy needs it; per-stage F, I, W costs that
// differ between stages (so a wrong wait shows), comm latency `latency` on every boundary.
PlanRequest RuntimeRequest(const StrategyCase& c, int ranks, int microbatches, double latency);

// Actions for hand-written programs.
Action Compute(ActionKind kind, int stage, int mb);
Action Comm(ActionKind kind, int stage, int mb, int peer);

// The plan, or an empty one after a test failure naming why it did not plan.
Plan BuildOrFail(const PlanRequest& request);

}  // namespace pipeplan::runtime::testing
