// Steps without a barrier (LocalRunOptions::step_barrier = false): each rank starts its next
// step as soon as it ended its last. Every strategy still runs with every message where it
// belongs (the synthetic executor checks each one: a message of step k + 1 taken by a receive
// of step k would fail it), every step's timeline is whole and starts at its earliest rank,
// and a rank that stalls is still named, though no barrier waits for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeplan/runtime/synthetic_run.h"
#include "pipeplan/strategies/strategy.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::BuildOrFail;

LocalRunOptions WithoutBarrier(double timeout) {
  LocalRunOptions options;
  options.steps = 3;
  options.warmup = 1;
  options.timeout_seconds = timeout;
  options.step_barrier = false;
  return options;
}

TEST(NoStepBarrier, EveryStrategyRunsWithEveryMessageWhereItBelongs) {
  for (const Strategy& strategy : AllStrategies()) {
    const std::string name(strategy.name);
    for (const bool post_validation : {false, true}) {
      PlanRequest request =
          testing::SmallRequest(name, 4, strategy.min_stages_per_rank, post_validation);
      StatusOr<Plan> plan = BuildPlan(request);
      if (!plan.ok()) {  // post-validation applies to the zero-bubble family only
        EXPECT_TRUE(post_validation) << name << ": " << plan.status().message();
        continue;
      }
      LocalRunOptions options = WithoutBarrier(30);
      std::vector<double> seconds;
      options.on_step = [&](const StepReport& report) { seconds.push_back(report.seconds); };
      const auto run = RunSyntheticInProcess(
          *plan, {.seconds_per_unit = 1e-5, .fail_validation_at = post_validation ? 2 : -1},
          options);
      const std::string where = name + (post_validation ? " with PV" : "");
      ASSERT_TRUE(run.ok()) << where << ": " << run.status().message();
      ASSERT_EQ(run->size(), 3u) << where;
      EXPECT_EQ(seconds.size(), 4u) << where << ": one report per step, warm-up included";
      for (const double s : seconds) EXPECT_GT(s, 0.0) << where;
      // Time zero is the earliest rank's start of the step: nothing before it.
      for (const Timeline& step : *run) {
        for (const RankTimeline& rank : step.ranks) {
          ASSERT_EQ(rank.actions.size(), plan->programs[rank.rank.value].actions.size());
          for (const ActionTiming& action : rank.actions) {
            EXPECT_GE(action.start, 0.0) << where << ", rank " << rank.rank.value;
            EXPECT_GE(action.end, action.start) << where << ", rank " << rank.rank.value;
          }
        }
      }
    }
  }
}

// Each step's time zero on the run's clock (StepReport::start): with the barrier a step opens
// after the last one ended; without it, 1F1B's last rank, done with a step while rank 0 still
// runs its last backwards, starts the next one before that step's end.
TEST(NoStepBarrier, StepStartsOverlapThePreviousStepsTailOnlyWithoutTheBarrier) {
  const Plan plan = BuildOrFail(testing::SmallRequest("1f1b", 4, 1, false));
  constexpr double kSecondsPerUnit = 2e-4;
  for (const bool barrier : {true, false}) {
    LocalRunOptions options = WithoutBarrier(30);
    options.step_barrier = barrier;
    options.seconds_per_unit = kSecondsPerUnit;  // timelines in the plan's unit
    std::vector<double> starts;
    std::vector<double> ends;  // each step's last action, on the run's clock
    options.on_step = [&](const StepReport& report) {
      // Every rank's start; the step's is the earliest (all of them with the barrier).
      ASSERT_EQ(report.rank_starts.size(), 4u);
      EXPECT_EQ(*std::ranges::min_element(report.rank_starts), report.start);
      if (barrier) {
        EXPECT_EQ(*std::ranges::max_element(report.rank_starts), report.start);
      } else if (report.step > 0) {
        EXPECT_GT(report.rank_starts[0], report.rank_starts[3]) << "rank 3 ended first";
      }
      starts.push_back(report.start);
      ends.push_back(report.start + report.timeline->metrics.makespan * kSecondsPerUnit);
    };
    const auto run = RunSyntheticInProcess(plan, {.seconds_per_unit = kSecondsPerUnit}, options);
    ASSERT_TRUE(run.ok()) << run.status().message();
    ASSERT_EQ(starts.size(), 4u);
    EXPECT_EQ(starts[0], 0.0);
    for (size_t k = 1; k < starts.size(); ++k) {
      SCOPED_TRACE((barrier ? "barrier, step " : "no barrier, step ") + std::to_string(k));
      EXPECT_GT(starts[k], starts[k - 1]);
      if (barrier) {
        EXPECT_GE(starts[k], ends[k - 1]);
      } else {
        EXPECT_LT(starts[k], ends[k - 1]);
      }
    }
  }
}

// Rank 0 stalls in its second step's forward: ranks that went ahead wait for it, and the
// watchdog names it first.
TEST(NoStepBarrier, AStalledRankIsNamed) {
  const Plan plan = BuildOrFail(testing::SmallRequest("1f1b", 3, 1, false));
  size_t forward = 0;
  while (plan.programs[0].actions[forward].kind != ActionKind::kForward) ++forward;
  const auto run = RunSyntheticInProcess(plan, {.seconds_per_unit = 1e-5}, WithoutBarrier(0.3),
                                         Fault{FaultKind::kStall, RankId(0), forward, 1});
  ASSERT_FALSE(run.ok());
  const std::string message = run.status().message();
  EXPECT_EQ(message.find("stalled: rank 0, action " + std::to_string(forward)), 0u) << message;
  EXPECT_NE(message.find("; rank 1, action"), std::string::npos) << message;
}

}  // namespace
}  // namespace pipeplan::runtime
