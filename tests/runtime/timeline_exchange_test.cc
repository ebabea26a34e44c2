// Ranks in processes of their own (threads here) step together through their coordinators'
// barriers, hand rank 0 their timelines through the store, and leave together.
#include "pipeplan/runtime/timeline_exchange.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/coordinator.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/rank_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "pipeplan/simulation/measured_timeline.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using std::chrono::milliseconds;
using testing::RuntimeRequest;

constexpr milliseconds kWait{5000};

struct RankOutcome {
  StatusOr<std::vector<RankTimeline>> mine = Status(StatusCode::kInternal, "not run");
  Status published;
  StatusOr<std::vector<Timeline>> gathered = Status(StatusCode::kInternal, "not gathered");
  Status left;
};

// Every rank as pipeplan-torch runs one in a process: RunRank with the coordinator's barrier,
// its timelines published, rank 0 gathering, then all leaving together.
std::vector<RankOutcome> RunRanksThroughTheStore(const Plan& plan, int steps) {
  const int ranks = plan.request.topology.ranks;
  const std::vector<std::unique_ptr<Transport>> transports = MakeInProcTransports(ranks);
  const std::vector<std::unique_ptr<Coordinator>> coordinators = MakeInProcCoordinators(ranks);
  std::vector<RankOutcome> out(ranks);
  std::vector<std::jthread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      Coordinator& coordinator = *coordinators[r];
      SyntheticExecutor executor(plan, RankId(r), SyntheticOptions{.seconds_per_unit = 1e-4});
      RankRunOptions options;
      options.steps = steps;
      options.warmup = 1;
      options.timeout_seconds = 5;
      options.seconds_per_unit = 1e-4;
      options.barrier = [&](int step) {
        return coordinator.Barrier("step-" + std::to_string(step), kWait);
      };
      RankOutcome& outcome = out[r];
      outcome.mine = RunRank(plan, RankId(r), executor, *transports[r], options);
      if (!outcome.mine.ok()) return;
      outcome.published = PublishTimelines(coordinator, RankId(r), *outcome.mine);
      if (r == 0) outcome.gathered = GatherTimelines(coordinator, plan, steps, kWait);
      outcome.left = LeaveTogether(coordinator, r, ranks, kWait);
    });
  }
  threads.clear();
  return out;
}

TEST(TimelineExchange, RankZeroAssemblesEveryRanksStepsAsTheyWereMeasured) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 3, 6, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<RankOutcome> run = RunRanksThroughTheStore(*plan, 2);
  for (const RankOutcome& outcome : run) {
    ASSERT_TRUE(outcome.mine.ok()) << outcome.mine.status().message();
    EXPECT_TRUE(outcome.published.ok()) << outcome.published.message();
    EXPECT_TRUE(outcome.left.ok()) << outcome.left.message();
  }
  ASSERT_TRUE(run[0].gathered.ok()) << run[0].gathered.status().message();
  ASSERT_EQ(run[0].gathered->size(), 2u);
  for (size_t step = 0; step < 2; ++step) {
    std::vector<RankTimeline> ranks;
    ranks.reserve(run.size());
    for (const RankOutcome& outcome : run) ranks.push_back(outcome.mine->at(step));
    const StatusOr<Timeline> direct = AssembleMeasuredTimeline(*plan, ranks);
    ASSERT_TRUE(direct.ok()) << direct.status().message();
    EXPECT_EQ(run[0].gathered->at(step), *direct) << "step " << step;
  }
}

TEST(TimelineExchange, AMissingRanksTimelineIsNamed) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 2, 2, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<std::unique_ptr<Coordinator>> coordinators = MakeInProcCoordinators(2);
  RankTimeline only;
  only.rank = RankId(0);
  ASSERT_TRUE(PublishTimelines(*coordinators[0], RankId(0), {only}).ok());
  const StatusOr<std::vector<Timeline>> gathered =
      GatherTimelines(*coordinators[0], *plan, 1, milliseconds(20));
  ASSERT_FALSE(gathered.ok());
  EXPECT_EQ(gathered.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(gathered.status().message().find("'timeline/1/0'"), std::string::npos)
      << gathered.status().message();
}

TEST(InProcCoordinator, ABarrierOthersDoNotReachFailsNamingIt) {
  const std::vector<std::unique_ptr<Coordinator>> coordinators = MakeInProcCoordinators(3);
  const Status alone = coordinators[1]->Barrier("done", milliseconds(20));
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.message().find("barrier 'done': 1 of 3 ranks"), std::string::npos)
      << alone.message();
}

TEST(InProcCoordinator, TheFirstAbortWins) {
  const std::vector<std::unique_ptr<Coordinator>> coordinators = MakeInProcCoordinators(2);
  EXPECT_FALSE(coordinators[0]->PublishedAbort().has_value());
  EXPECT_EQ(coordinators[1]->PublishAbort(Internal("rank 1 failed")).message(), "rank 1 failed");
  EXPECT_EQ(coordinators[0]->PublishAbort(Internal("rank 0 failed")).message(), "rank 1 failed");
  ASSERT_TRUE(coordinators[0]->PublishedAbort().has_value());
  EXPECT_EQ(coordinators[0]->PublishedAbort()->message(), "rank 1 failed");
}

}  // namespace
}  // namespace pipeplan::runtime
