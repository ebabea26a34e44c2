// A plan made by the planner is simulated once: its timeline is handed on with it (Evaluated),
// not simulated again by whoever needs it (auto's pick, the limit's check, the torch op).
#include <gtest/gtest.h>

#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

TEST(EvaluatedOnce, PlanUnderALimitIsSimulatedOnceAndItsTimelineIsItsOwn) {
  for (const double limit : {0.0, 8.0}) {
    PlanRequest request = MakeRequest("1f1b", 4, 8, 1, 1, 1.2, 0.8, 0.1);
    if (limit > 0) request.memory.limit = limit;
    const SimulationCount count;
    const StatusOr<Evaluated> planned = BuildAndSimulatePlan(request);
    ASSERT_TRUE(planned.ok()) << planned.status().message();
    EXPECT_EQ(count.value(), 1) << "limit " << limit;
    EXPECT_EQ(planned->timeline, testing::SimulateOrDie(planned->plan)) << "limit " << limit;
  }
}

TEST(EvaluatedOnce, EveryAutoCandidateIsSimulatedAtMostOnceAndThePickNotAgain) {
  PlanRequest request = MakeRequest("auto", 4, 8, 1, 1, 1.2, 0.8, 0.1);
  request.memory.limit = 6;  // every candidate's plan is checked against it
  const SimulationCount count;
  const StatusOr<AutoResult> result = AutoSearch(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_LE(count.value(), static_cast<int>(result->candidates.size()));
  EXPECT_EQ(result->best.timeline, testing::SimulateOrDie(result->best.plan));
  // Each is checked against the limit, and zb's memory steps order under limits of their own:
  // the check's simulation is the candidate's timeline.
  int ordered = 0;
  for (const AutoCandidate& candidate : result->candidates) {
    EXPECT_EQ(candidate.request.memory.limit, request.memory.limit);
    ordered += candidate.request.options.order_limit.has_value() ? 1 : 0;
    const SimulationCount alone;
    const StatusOr<Evaluated> planned = BuildAndSimulatePlan(candidate.request);
    EXPECT_LE(alone.value(), 1) << candidate.request.strategy;
  }
  EXPECT_GT(ordered, 0);
}

TEST(EvaluatedOnce, CountsNest) {
  const SimulationCount outer;
  {
    const SimulationCount inner;
    ASSERT_TRUE(BuildAndSimulatePlan(MakeRequest("gpipe", 2, 4)).ok());
    EXPECT_EQ(inner.value(), 1);
  }
  EXPECT_EQ(outer.value(), 0);
  ASSERT_TRUE(BuildAndSimulatePlan(MakeRequest("gpipe", 2, 4)).ok());
  EXPECT_EQ(outer.value(), 1);
}

}  // namespace
}  // namespace pipeplan
