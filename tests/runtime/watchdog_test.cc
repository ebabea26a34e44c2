// The watchdog fails only real stalls: a rank waiting on a busy, progressing peer is fine
// however long it waits; a rank that itself makes no progress (in an action, in BeginStep)
// or a cycle of waits is diagnosed, naming the rank that holds everyone up.

#include "pipeplan/runtime/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "pipeplan/runtime/synthetic_run.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::BuildOrFail;
using testing::Comm;
using testing::Compute;

PlanRequest Request(const std::string& strategy, int ranks, int microbatches) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  return request;
}

// Rank 0 receives from rank 1 (stage 1's gradient); rank 1 receives from rank 0.
struct TwoRanks {
  RankProgram zero{
      RankId(0), {Comm(ActionKind::kRecvBackward, 0, 0, 1), Compute(ActionKind::kBackward, 0, 0)}};
  RankProgram one{RankId(1),
                  {Comm(ActionKind::kRecvForward, 1, 0, 0), Compute(ActionKind::kForward, 1, 0)}};
  RankProgress progress[2];
  std::vector<WatchedRank> Watched() { return {{&zero, &progress[0]}, {&one, &progress[1]}}; }
};

TEST(WatchdogDiagnosis, AWaitOnABusyPeerThatProgressesIsNoStall) {
  TwoRanks ranks;
  ranks.progress[0].Set(Activity::kWaiting, 1, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Rank 1 has just started new work: rank 0's wait, longer than the timeout, is pipeline
  // fill, not a stall. Judged at the instant rank 1 started.
  ranks.progress[1].Set(Activity::kRunning, 1);
  const TimePoint now = ranks.progress[1].Read().since;
  ASSERT_GE(SecondsBetween(ranks.progress[0].Read().since, now), 0.2);
  EXPECT_TRUE(DiagnoseStall(ranks.Watched(), 0.2, now).ok());
}

TEST(WatchdogDiagnosis, ARankStuckInItsActionIsNamedWithTheRanksItHoldsUp) {
  TwoRanks ranks;
  ranks.progress[0].Set(Activity::kWaiting, 1, 0);
  ranks.progress[1].Set(Activity::kRunning, 1);
  const Status stall = DiagnoseStall(ranks.Watched(), 1.0, AfterSeconds(Clock::now(), 2.0));
  EXPECT_EQ(stall.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stall.message().find("stalled: rank 1, action 1 (1F0) has been running for 2"), 0u)
      << stall.message();
  EXPECT_NE(stall.message().find("; rank 0, action 1 (0B0) waits for the gradient of stage 1 "
                                 "microbatch 0 from rank 1 (action 0)"),
            std::string::npos)
      << stall.message();
}

TEST(WatchdogDiagnosis, ACycleOfWaitsIsAStallOnceEveryRankInItHasWaitedTheTimeout) {
  TwoRanks ranks;
  ranks.progress[0].Set(Activity::kWaiting, 1, 0);
  ranks.progress[1].Set(Activity::kWaiting, 1, 0);
  const TimePoint later = AfterSeconds(Clock::now(), 2.0);
  const Status stall = DiagnoseStall(ranks.Watched(), 1.0, later);
  EXPECT_EQ(stall.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(stall.message().find("waits for the gradient of stage 1 microbatch 0 from rank 1"),
            std::string::npos)
      << stall.message();
  EXPECT_NE(stall.message().find("waits for the activation of stage 0 microbatch 0 from rank 0"),
            std::string::npos)
      << stall.message();
  // One of them just started waiting: the cycle may still be resolving.
  ranks.progress[1].Set(Activity::kWaiting, 1, 0);
  EXPECT_TRUE(DiagnoseStall(ranks.Watched(), 1.0, AfterSeconds(Clock::now(), 0.5)).ok());
}

TEST(WatchdogDiagnosis, ARankInsideBeginStepOrEndStepIsWatched) {
  for (const auto& [activity, where] :
       {std::pair{Activity::kBeginning, "start of step (the executor's BeginStep)"},
        std::pair{Activity::kEnding, "end of step (the executor's EndStep)"}}) {
    TwoRanks ranks;
    ranks.progress[1].Set(activity, kNoAction);
    const Status stall = DiagnoseStall(ranks.Watched(), 1.0, AfterSeconds(Clock::now(), 2.0));
    EXPECT_EQ(
        stall.message().find("stalled: rank 1, " + std::string(where) + " has been running for"),
        0u)
        << stall.message();
  }
}

// 1F1B's fill at P=8 makes rank 0 wait (P-1)(F+B) = 1.05 s for its first gradient while
// every action lasts at most 0.1 s: with a 0.25 s timeout the run must pass.
TEST(RuntimeWatchdog, ALongPipelineFillWithShortActionsIsNoStall) {
  const Plan plan = BuildOrFail(Request("1f1b", 8, 8));
  LocalRunOptions options;
  options.steps = 1;
  options.warmup = 0;
  options.timeout_seconds = 0.25;
  options.seconds_per_unit = 0.05;
  const auto run = RunSyntheticInProcess(plan, {.seconds_per_unit = 0.05}, options);
  EXPECT_TRUE(run.ok()) << run.status().message();
}

// An executor whose BeginStep on rank 1 blocks until the step is stopped.
class BlockingBegin final : public OpExecutor {
 public:
  BlockingBegin(const Plan& plan, RankId rank)
      : inner_(plan, rank, {.seconds_per_unit = 1e-5}), blocks_(rank.value == 1) {}
  Status BeginStep(const OpContext& context) override {
    while (blocks_ && !context.stop.stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return blocks_ ? Aborted("stopped in BeginStep") : inner_.BeginStep(context);
  }
  Status Run(const Action& action, const OpContext& context) override {
    return inner_.Run(action, context);
  }
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override {
    return inner_.SendBuffer(send, context);
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return inner_.RecvBuffer(recv, context);
  }
  Status EndStep(const OpContext& context) override { return inner_.EndStep(context); }

 private:
  SyntheticExecutor inner_;
  bool blocks_;
};

TEST(RuntimeWatchdog, AnExecutorBlockedInBeginStepIsDiagnosedAndStopped) {
  const Plan plan = BuildOrFail(Request("1f1b", 2, 2));
  std::vector<std::unique_ptr<OpExecutor>> owned;
  std::vector<OpExecutor*> executors;
  for (int r = 0; r < 2; ++r) {
    owned.push_back(std::make_unique<BlockingBegin>(plan, RankId(r)));
    executors.push_back(owned.back().get());
  }
  auto transports = MakeInProcTransports(2);
  const std::vector<Transport*> raw = {transports[0].get(), transports[1].get()};
  LocalRunOptions options;
  options.steps = 1;
  options.warmup = 0;
  options.timeout_seconds = 0.2;
  const auto run = RunLocal(plan, executors, raw, options);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message().find("stalled: rank 1, start of step (the executor's "
                                        "BeginStep) has been running for"),
            0u)
      << run.status().message();
  EXPECT_NE(run.status().message().find("; rank 0, action"), std::string::npos)
      << run.status().message();
}

// More unmatched sends on one pair than any fixed queue bound would allow: a fast stage 0
// sends all 4200 activations before stage 1 takes the first few.
TEST(InProcTransport, AValidPlanRunsHoweverManySendsItQueues) {
  PlanRequest request = Request("gpipe", 2, 4200);
  request.costs.stages = {StageCosts{.forward = 0.001, .backward = 0.002},
                          StageCosts{.forward = 0.01, .backward = 0.02}};
  const Plan plan = BuildOrFail(request);
  LocalRunOptions options;
  options.steps = 1;
  options.warmup = 0;
  options.seconds_per_unit = 1e-3;
  const auto run = RunSyntheticInProcess(plan, {.seconds_per_unit = 1e-3}, options);
  EXPECT_TRUE(run.ok()) << run.status().message();
}

}  // namespace
}  // namespace pipeplan::runtime
