// Helpers for the runtime tests: plans for every strategy at the size, a harness that
// runs a plan in process with synthetic executors, and an executor that injects faults.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/strategy.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"

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

// Runs `plan` with one (possibly faulty) synthetic executor per rank over in-process
// transports.
StatusOr<std::vector<Timeline>> RunSynthetic(const Plan& plan, const SyntheticOptions& synthetic,
                                             const LocalRunOptions& options,
                                             std::optional<Fault> fault = std::nullopt);

}  // namespace pipeplan::runtime::testing
