// The smallest memory limit an error reports plans: for zb, zbv and auto on random non-uniform
// costs and activations, a request with the reported limit, or one above it, plans and its peak
// holds it. And it is the smallest: a limit 0.1% below it is refused again.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "pipeplan/planner/planner.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

// P ranks, M microbatches, V stages per rank, costs and activations drawn from `seed`.
PlanRequest RandomRequest(const std::string& strategy, int ranks, int microbatches, int v,
                          unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  std::uniform_real_distribution<double> share(0.1, 0.9);
  PlanRequest request = MakeRequest(strategy, ranks, microbatches, v);
  request.costs.stages.clear();
  request.memory.stages.clear();
  // auto (v = 0) reads one entry per rank's share.
  for (int s = 0; s < ranks * std::max(v, 1); ++s) {
    const double input = cost(random);
    const double weight = cost(random);
    request.costs.stages.push_back(StageCosts{cost(random), input + weight, input, weight, 0});
    const double activation = cost(random);
    request.memory.stages.push_back(StageMemory{activation, share(random) * activation});
  }
  request.costs.boundaries = {BoundaryCosts{0.1 * cost(random), 0, 0}};
  request.memory.static_per_rank = cost(random);
  return request;
}

// The limit named by "the smallest limit that works is X" / "... that fits is X". (Not
// std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitizer build.)
double ReportedLimit(const std::string& message) {
  for (const std::string phrase :
       {"the smallest limit that works is ", "the smallest limit that fits is "}) {
    const size_t at = message.find(phrase);
    if (at != std::string::npos) return std::stod(message.substr(at + phrase.size()));
  }
  ADD_FAILURE() << "no smallest limit in: " << message;
  return 0;
}

struct Case {
  std::string strategy;
  int v;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& param) { return param.param.strategy; }

// Calls `check(request, smallest)` for 15 random requests refused for a limit below anything,
// `smallest` being the limit the refusal reports.
template <typename Check>
void ForEachRefusal(const Case& c, Check check) {
  int checked = 0;
  for (const auto& [ranks, microbatches] : {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 12}}) {
    for (unsigned seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE("P=" + std::to_string(ranks) + " M=" + std::to_string(microbatches) + " seed " +
                   std::to_string(seed));
      PlanRequest request = RandomRequest(c.strategy, ranks, microbatches, c.v, seed);
      request.memory.limit = request.memory.static_per_rank * 0.5;  // below anything
      const StatusOr<Plan> refused = testing::PlanOf(request);
      ASSERT_FALSE(refused.ok());
      check(request, ReportedLimit(refused.status().message()));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15);
}

class SmallestLimit : public ::testing::TestWithParam<Case> {};

TEST_P(SmallestLimit, PlansAtTheReportedLimitAndAboveIt) {
  ForEachRefusal(GetParam(), [](PlanRequest request, double smallest) {
    for (const double above : {0.0, 1e-3, 0.05, 0.3}) {
      const double limit = smallest * (1 + above);
      request.memory.limit = limit;
      const StatusOr<Plan> plan = testing::PlanOf(request);
      ASSERT_TRUE(plan.ok()) << "at " << limit << " (the reported " << smallest
                             << "): " << plan.status().message();
      EXPECT_LE(PeakMemory(testing::SimulateOrDie(*plan)), limit * (1 + 1e-9));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Strategies, SmallestLimit,
                         ::testing::Values(Case{"zb", 1}, Case{"zbv", 2}, Case{"auto", 0}),
                         CaseName);

class NothingSmallerPlans : public ::testing::TestWithParam<Case> {};

TEST_P(NothingSmallerPlans, JustBelowTheReportedLimitIsRefused) {
  ForEachRefusal(GetParam(), [](PlanRequest request, double smallest) {
    request.memory.limit = smallest * (1 - 1e-3);
    EXPECT_FALSE(testing::PlanOf(request).ok()) << "just below the reported " << smallest;
  });
}

INSTANTIATE_TEST_SUITE_P(Strategies, NothingSmallerPlans,
                         ::testing::Values(Case{"zb", 1}, Case{"zbv", 2}, Case{"auto", 0}),
                         CaseName);

}  // namespace
}  // namespace pipeplan
