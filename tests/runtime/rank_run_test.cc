// RunRank: one rank per caller (a thread here, a process in real runs), stepping together
// through the barrier, and AssembleTimeline putting their timelines back into one.
#include "pipeplan/runtime/rank_run.h"

#include <gtest/gtest.h>

#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "pipeplan/simulation/measured_timeline.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::RuntimeRequest;
using Transports = std::vector<std::unique_ptr<Transport>>;

struct RankResults {
  std::vector<StatusOr<std::vector<RankTimeline>>> results;
};

// Runs every rank of `plan` through RunRank on its own thread, one std::barrier per step.
RankResults RunAllRanks(const Plan& plan, int steps, const std::optional<Fault>& fault = {}) {
  const int ranks = plan.request.topology.ranks;
  const Transports transports = MakeInProcTransports(ranks);
  std::barrier sync(ranks);
  RankResults out;
  out.results.resize(ranks, Status(StatusCode::kInternal, "not run"));
  std::vector<std::jthread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<OpExecutor> executor = std::make_unique<SyntheticExecutor>(
          plan, RankId(r), SyntheticOptions{.seconds_per_unit = 1e-4});
      if (fault) {
        executor = std::make_unique<FaultInjectingExecutor>(std::move(executor), RankId(r), *fault);
      }
      RankRunOptions options;
      options.steps = steps;
      options.warmup = 1;
      options.timeout_seconds = 5;
      options.seconds_per_unit = 1e-4;
      options.barrier = [&](int) {
        sync.arrive_and_wait();
        return Status::Ok();
      };
      out.results[r] = RunRank(plan, RankId(r), *executor, *transports[r], options);
      if (!out.results[r].ok()) sync.arrive_and_drop();
    });
  }
  threads.clear();
  return out;
}

TEST(RankRun, RanksRunTheirProgramsAndTimelinesAssemble) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 3, 6, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const RankResults run = RunAllRanks(*plan, 2);
  std::vector<RankTimeline> step0;
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(run.results[r].ok()) << run.results[r].status().message();
    ASSERT_EQ(run.results[r]->size(), 2u);
    const RankTimeline& t = run.results[r]->front();
    EXPECT_EQ(t.rank.value, r);
    EXPECT_EQ(t.actions.size(), plan->programs[r].actions.size());
    step0.push_back(t);
  }
  const StatusOr<Timeline> timeline = AssembleMeasuredTimeline(*plan, step0);
  ASSERT_TRUE(timeline.ok()) << timeline.status().message();
  EXPECT_EQ(timeline->source, TimelineSource::kMeasured);
  EXPECT_GT(timeline->metrics.makespan, 0.0);
  // Each rank's busy time is its compute time: 1f1b on 6 microbatches, F + B per microbatch.
  for (const RankTimeline& r : timeline->ranks) EXPECT_GT(r.busy, 0.0);

  step0.pop_back();
  const StatusOr<Timeline> short_one = AssembleMeasuredTimeline(*plan, step0);
  ASSERT_FALSE(short_one.ok());
  EXPECT_EQ(short_one.status().message(), "got timelines of 2 ranks for a plan of 3");
}

// A failing rank aborts the transport: the others stop with the abort, not a hang.
TEST(RankRun, AFailingRankStopsTheOthers) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 3, 6, 0.0));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  size_t first_compute = 0;
  while (!IsCompute(plan->programs[1].actions[first_compute].kind)) ++first_compute;
  const RankResults run =
      RunAllRanks(*plan, 1, Fault{FaultKind::kFail, RankId(1), first_compute, 1});
  ASSERT_FALSE(run.results[1].ok());
  EXPECT_NE(
      run.results[1].status().message().find("rank 1, action " + std::to_string(first_compute)),
      std::string::npos)
      << run.results[1].status().message();
  for (const int r : {0, 2}) {
    ASSERT_FALSE(run.results[r].ok()) << "rank " << r;
    EXPECT_NE(run.results[r].status().message().find("injected failure"), std::string::npos)
        << run.results[r].status().message();
  }
}

TEST(RankRun, RejectsBadOptions) {
  const StatusOr<Plan> plan = BuildPlan(RuntimeRequest({"1f1b", false}, 2, 2, 0.0));
  ASSERT_TRUE(plan.ok());
  const Transports transports = MakeInProcTransports(2);
  SyntheticExecutor executor(*plan, RankId(0), {});
  RankRunOptions options;
  EXPECT_EQ(RunRank(*plan, RankId(2), executor, *transports[0], options).status().message(),
            "rank 2 is outside the plan's 2 ranks");
  options.steps = 0;
  EXPECT_EQ(RunRank(*plan, RankId(0), executor, *transports[0], options).status().message(),
            "steps must be at least 1");
}

}  // namespace
}  // namespace pipeplan::runtime
