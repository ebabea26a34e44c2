// Under a memory limit, zb and zbv keep to their own count of memory, which bounds the
// simulated peak from above; the planner orders them again under raised limits of their own
// (OrderLimitsAbove) and keeps the fastest plan the asked limit fits. So a limit never makes a
// plan slower than the strategy's own plan under it, and a limit the unlimited plan fits
// leaves it as fast as without one. auto lists each raised limit as a candidate of its own
// (options.order_limit), planned once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pipeplan/model/topology.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;
using testing::SimulateOrDie;

// Shaped as one transformer block a stage calibrated on an H200 (hidden 1024, sequence 512,
// microbatch 4; docs/gpu-results.md, 2026-11-28), rounded: ms and MiB. I frees the attention
// probabilities, W the rest, and I's transient is as large as an activation.
PlanRequest H200Shaped(const std::string& strategy, int ranks, int microbatches, int v) {
  PlanRequest request = MakeRequest(strategy, ranks, microbatches, v, 1.49, 1.65, 1.18, 0.03);
  StageMemory stage;
  stage.activation = 200;
  stage.freed_by_input = 56;
  stage.forward_transient = 48;
  stage.backward_transient = 8;
  stage.input_transient = 200;
  stage.weight_transient = 64;
  stage.retained = 8;
  stage.received_input = 8;
  stage.received_gradient = 8;
  request.memory.stages = {stage};
  request.memory.static_per_rank = 230;
  return request;
}

// As H200Shaped, with every figure drawn within a factor of two of it from `seed`.
PlanRequest Drawn(const std::string& strategy, int ranks, int microbatches, int v, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  PlanRequest request = H200Shaped(strategy, ranks, microbatches, v);
  StageMemory& stage = request.memory.stages.front();
  stage.activation *= factor(random);
  stage.freed_by_input = std::min(stage.freed_by_input * factor(random), stage.activation);
  stage.forward_transient *= factor(random);
  stage.input_transient *= factor(random);
  stage.weight_transient *= factor(random);
  stage.retained *= factor(random);
  request.memory.static_per_rank *= factor(random);
  StageCosts& costs = request.costs.stages.front();
  costs.forward *= factor(random);
  costs.backward_input *= factor(random);
  costs.backward_weight *= factor(random);
  costs.backward = costs.backward_input + costs.backward_weight;
  return request;
}

// The strategy's own plan under the request's limit, as the planner had it before raising.
StatusOr<Plan> StrategysOwnPlan(const PlanRequest& raw) {
  PIPEPLAN_ASSIGN_OR_RETURN(const NormalizedRequest normalized, Normalize(raw));
  const PlanRequest& request = normalized.request;
  const StageMap stages(request.topology);
  PIPEPLAN_ASSIGN_OR_RETURN(ComputeOrder order,
                            FindStrategy(request.strategy)->generate(request, stages));
  return BuildPlanFromOrder(request, std::move(order));
}

struct Case {
  std::string strategy;
  int v;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& param) { return param.param.strategy; }

class RaisedLimit : public ::testing::TestWithParam<Case> {};

// On the H200's figures, zbv's own plan under the peak of its unlimited plan is 6% slower
// (the greedy counts I's transient and every retained gradient with each F); the planner's is
// the unlimited plan's speed.
TEST_P(RaisedLimit, UnderTheUnlimitedPlansPeakThePlanIsAsFast) {
  for (const int ranks : {2, 4, 8}) {
    SCOPED_TRACE("P=" + std::to_string(ranks));
    PlanRequest request = H200Shaped(GetParam().strategy, ranks, 2 * ranks, GetParam().v);
    const StatusOr<Plan> unlimited = BuildPlan(request);
    ASSERT_TRUE(unlimited.ok()) << unlimited.status().message();
    const Timeline free_run = SimulateOrDie(*unlimited);
    request.memory.limit = PeakMemory(free_run);
    const StatusOr<Plan> limited = BuildPlan(request);
    ASSERT_TRUE(limited.ok()) << limited.status().message();
    const Timeline limited_run = SimulateOrDie(*limited);
    EXPECT_LE(PeakMemory(limited_run), *request.memory.limit * (1 + 1e-12));
    EXPECT_LE(limited_run.metrics.makespan, free_run.metrics.makespan * (1 + 1e-12));
    const StatusOr<Plan> own = StrategysOwnPlan(request);
    if (own.ok()) {
      std::printf("[ raised ] %s P=%d under %.1f: the strategy's own plan %.2f, planned %.2f\n",
                  GetParam().strategy.c_str(), ranks, *request.memory.limit,
                  SimulateOrDie(*own).metrics.makespan, limited_run.metrics.makespan);
    }
  }
}

// Drawn figures and limits from the unlimited plan's peak down: every plan fits its limit,
// names the limit asked (not a raised one), and is no slower than the strategy's own plan.
TEST_P(RaisedLimit, NeverSlowerThanTheStrategysOwnPlanAndAlwaysWithinTheLimit) {
  int compared = 0;
  int faster = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    PlanRequest request = Drawn(GetParam().strategy, 4, 8, GetParam().v, seed);
    const StatusOr<Plan> unlimited = BuildPlan(request);
    ASSERT_TRUE(unlimited.ok()) << unlimited.status().message();
    const double free_peak = PeakMemory(SimulateOrDie(*unlimited));
    for (const double share : {1.0, 0.95, 0.9, 0.85, 0.8}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", limit " + std::to_string(share) +
                   " of the unlimited peak");
      request.memory.limit = share * free_peak;
      const StatusOr<Plan> own = StrategysOwnPlan(request);
      const StatusOr<Plan> planned = BuildPlan(request);
      // Where the strategy plans, so does the planner (and where it is stuck, a raised order
      // may still fit: NamesTheSmallestLimitOnlyWhereNoRaisedOrderFits).
      if (own.ok()) {
        ASSERT_TRUE(planned.ok()) << planned.status().message();
      }
      if (!planned.ok() || !own.ok()) continue;
      ASSERT_EQ(planned->request.memory.limit, request.memory.limit);
      const Timeline run = SimulateOrDie(*planned);
      EXPECT_LE(PeakMemory(run), *request.memory.limit * (1 + 1e-12));
      const double own_makespan = SimulateOrDie(*own).metrics.makespan;
      EXPECT_LE(run.metrics.makespan, own_makespan * (1 + 1e-12));
      faster += run.metrics.makespan < own_makespan * (1 - 1e-9) ? 1 : 0;
      ++compared;
    }
  }
  std::printf("[ raised ] %s: %d of %d limited plans faster than the strategy's own\n",
              GetParam().strategy.c_str(), faster, compared);
  EXPECT_GE(compared, 10);
  EXPECT_GT(faster, 0);
}

// Below the smallest limit the greedy orders under, its count (an upper bound) says it is
// stuck; an order under a raised limit can still fit by its simulated peak, and then that plan
// is the answer, not the error. Where no raised order fits either, the error is the greedy's.
TEST_P(RaisedLimit, NamesTheSmallestLimitOnlyWhereNoRaisedOrderFits) {
  PlanRequest request = H200Shaped(GetParam().strategy, 4, 8, GetParam().v);
  const StatusOr<PlanRequest> smallest = AtSmallestLimit(request);
  ASSERT_TRUE(smallest.ok()) << smallest.status().message();
  int rescued = 0;
  for (const double share : {0.999, 0.99, 0.97, 0.95, 0.9, 0.8, 0.5}) {
    SCOPED_TRACE("limit " + std::to_string(share) + " of the greedy's smallest");
    request.memory.limit = share * *smallest->memory.limit;
    EXPECT_FALSE(StrategysOwnPlan(request).ok());
    const StatusOr<Plan> planned = BuildPlan(request);
    if (!planned.ok()) {
      // The greedy's count is above a plan's simulated peak here: its limit is not claimed to
      // be the smallest that works.
      EXPECT_NE(planned.status().message().find("the smallest limit it orders under is "),
                std::string::npos)
          << planned.status().message();
      continue;
    }
    EXPECT_LE(PeakMemory(SimulateOrDie(*planned)), *request.memory.limit * (1 + 1e-12));
    ++rescued;
  }
  std::printf("[ raised ] %s: %d of 7 limits below the greedy's smallest planned\n",
              GetParam().strategy.c_str(), rescued);
  EXPECT_GT(rescued, 0);
  EXPECT_LT(rescued, 7);
}

INSTANTIATE_TEST_SUITE_P(Strategies, RaisedLimit, ::testing::Values(Case{"zb", 1}, Case{"zbv", 2}),
                         CaseName);

// auto does not run the raise search inside a candidate: each limit `plan` would try is a
// candidate of its own, checked against the asked limit and simulated once, and the pick is
// no slower than the strategy's plan.
TEST(RaisedOrderLimits, AreAutoCandidatesOfTheirOwnEachSimulatedOnce) {
  for (const Case& c : {Case{"zb", 1}, Case{"zbv", 2}}) {
    SCOPED_TRACE(c.strategy);
    PlanRequest strategys = H200Shaped(c.strategy, 4, 8, c.v);
    const StatusOr<Plan> unlimited = BuildPlan(strategys);
    ASSERT_TRUE(unlimited.ok()) << unlimited.status().message();
    strategys.memory.limit = 0.9 * PeakMemory(SimulateOrDie(*unlimited));
    PlanRequest request = strategys;  // figures of one stage at the strategy's V
    request.strategy = "auto";
    const SimulationCount count;
    const StatusOr<AutoResult> result = AutoSearch(request);
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_LE(count.value(), static_cast<int>(result->candidates.size()));

    const StatusOr<std::vector<double>> raised = OrderLimitsAbove(strategys);
    ASSERT_TRUE(raised.ok()) << raised.status().message();
    ASSERT_GE(raised->size(), 2u);
    EXPECT_TRUE(std::isinf(raised->back()));
    std::vector<double> listed;
    for (const AutoCandidate& candidate : result->candidates) {
      if (candidate.request.strategy != c.strategy) continue;
      ASSERT_TRUE(candidate.request.options.order_limit.has_value());
      EXPECT_EQ(candidate.request.memory.limit, strategys.memory.limit);
      listed.push_back(*candidate.request.options.order_limit);
    }
    for (const double limit : *raised) {
      EXPECT_NE(std::find(listed.begin(), listed.end(), limit), listed.end()) << limit;
    }
    EXPECT_NE(std::find(listed.begin(), listed.end(), *strategys.memory.limit), listed.end());

    const StatusOr<Evaluated> planned = BuildAndSimulatePlan(strategys);
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    EXPECT_LE(result->best.timeline.metrics.makespan,
              planned->timeline.metrics.makespan * (1 + 1e-12));
  }
}

// options.order_limit = inf orders as without a limit, and the plan is still checked against
// the asked one: it fits the unlimited plan's peak, and not less.
TEST(OrderLimit, NoneOrdersAsWithoutALimitAndTheAskedLimitStillBinds) {
  PlanRequest request = H200Shaped("zbv", 4, 8, 2);
  const StatusOr<Plan> unlimited = BuildPlan(request);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().message();
  const double peak = PeakMemory(SimulateOrDie(*unlimited));
  request.options.order_limit = std::numeric_limits<double>::infinity();
  request.memory.limit = peak;
  const StatusOr<Plan> ordered = BuildPlan(request);
  ASSERT_TRUE(ordered.ok()) << ordered.status().message();
  EXPECT_EQ(ordered->programs, unlimited->programs);
  EXPECT_EQ(ordered->request.memory.limit, peak);
  EXPECT_NE(ordered->provenance.options.find("order_limit=none"), std::string::npos)
      << ordered->provenance.options;

  request.memory.limit = 0.9 * peak;
  const StatusOr<Plan> above = BuildPlan(request);
  EXPECT_EQ(above.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(above.status().message().find("above the memory limit"), std::string::npos)
      << above.status().message();
}

TEST(OrderLimit, AppliesOnlyToTheStrategiesThatOrderUnderALimitAndMustBePositive) {
  PlanRequest request = MakeRequest("1f1b", 4, 8);
  request.options.order_limit = 5;
  EXPECT_EQ(BuildPlan(request).status().message(),
            "options.order_limit applies to the strategies that order under a memory limit of "
            "their own (zb, zb-1p, zb-2p, zbv), not 1f1b");
  request.strategy = "zb";
  for (const double bad : {0.0, -1.0, std::nan("")}) {
    request.options.order_limit = bad;
    const StatusOr<Plan> refused = BuildPlan(request);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("options.order_limit must be > 0 (inf: none)"),
              std::string::npos)
        << refused.status().message();
  }
}

}  // namespace
}  // namespace pipeplan
