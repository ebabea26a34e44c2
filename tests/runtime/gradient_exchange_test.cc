// The end-of-step gradient-state exchange (op_executor.h): every rank's EndStep sees every
// other rank's state of that same step; a rank slow to reach the exchange holds the others up
// without failing them; one that never reaches it is the one the watchdog names. The same for
// dual placement's sum with the mirror rank, which comes first.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::BuildOrFail;

// A synthetic rank whose state is (its rank, the step). EndStep records what it received;
// `stall_step` >= 0 makes its last compute action of that step block until stopped.
class Exchanging final : public testing::SyntheticWithState {
 public:
  Exchanging(const Plan& plan, RankId rank, int stall_step = -1)
      : SyntheticWithState(plan, rank, {.seconds_per_unit = 1e-5}),
        last_action_(LastCompute(plan.programs[rank.value])),
        stall_step_(stall_step) {}

  Status Run(const Action& action, const OpContext& context) override {
    if (context.step == stall_step_ && context.action_index == last_action_) {
      while (!context.stop.stop_requested())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return Aborted("stopped");
    }
    return SyntheticWithState::Run(action, context);
  }
  Status EndStep(const OpContext& context) override {
    seen_.push_back(states());
    return SyntheticWithState::EndStep(context);
  }

  static size_t LastCompute(const RankProgram& program) {
    size_t last = 0;
    for (size_t i = 0; i < program.actions.size(); ++i) {
      if (IsCompute(program.actions[i].kind)) last = i;
    }
    return last;
  }

  // Per step, every rank's state as EndStep found it.
  const std::vector<std::vector<std::array<double, 2>>>& seen() const { return seen_; }

 private:
  size_t last_action_;
  int stall_step_;
  std::vector<std::vector<std::array<double, 2>>> seen_;
};

PlanRequest Request(const std::string& strategy, int ranks, int stages_per_rank) {
  return testing::SmallRequest(strategy, ranks, stages_per_rank, /*post_validation=*/false);
}

struct ExchangeRun {
  std::vector<std::unique_ptr<Exchanging>> executors;
  StatusOr<std::vector<Timeline>> result = Status::Ok();
};

// One warm-up and two measured steps of `executors`, one per rank, in-process.
StatusOr<std::vector<Timeline>> RunThreeSteps(const Plan& plan,
                                              const std::vector<OpExecutor*>& executors,
                                              double timeout) {
  auto transports = MakeInProcTransports(static_cast<int>(executors.size()));
  std::vector<Transport*> raw;
  raw.reserve(transports.size());
  for (auto& t : transports) raw.push_back(t.get());
  LocalRunOptions options;
  options.steps = 2;
  options.warmup = 1;
  options.timeout_seconds = timeout;
  return RunLocal(plan, executors, raw, options);
}

std::unique_ptr<ExchangeRun> RunExchanging(const Plan& plan, int stalled_rank = -1,
                                           double timeout = 30) {
  const int world = plan.request.topology.ranks;
  auto run = std::make_unique<ExchangeRun>();
  std::vector<OpExecutor*> executors;
  for (int r = 0; r < world; ++r) {
    run->executors.push_back(
        std::make_unique<Exchanging>(plan, RankId(r), r == stalled_rank ? 1 : -1));
    executors.push_back(run->executors.back().get());
  }
  run->result = RunThreeSteps(plan, executors, timeout);
  return run;
}

TEST(GradientStateExchange, EveryRankEndsTheStepWithEveryRanksStateOfThatStep) {
  for (const PlanRequest& request : {Request("1f1b", 3, 1), Request("zbv", 2, 2)}) {
    const Plan plan = BuildOrFail(request);
    const std::unique_ptr<ExchangeRun> run = RunExchanging(plan);
    ASSERT_TRUE(run->result.ok()) << request.strategy << ": " << run->result.status().message();
    for (const auto& executor : run->executors) {
      ASSERT_EQ(executor->seen().size(), 3u) << "one EndStep per step, warm-up included";
      for (int step = 0; step < 3; ++step) {
        for (int r = 0; r < request.topology.ranks; ++r) {
          const std::array<double, 2> want{double(r), double(step)};
          EXPECT_EQ(executor->seen()[step][r], want)
              << request.strategy << ", step " << step << ", state of rank " << r;
        }
      }
    }
  }
}

// Rank 0's last W never ends: nothing waits for it but the exchange, where ranks 1 and 2
// wait for rank 0, which is the one named.
TEST(GradientStateExchange, ARankThatNeverGetsThereIsTheOneNamed) {
  const Plan plan = BuildOrFail(Request("zb-h1", 3, 1));
  const std::vector<Action>& actions = plan.programs[0].actions;
  size_t last = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (IsCompute(actions[i].kind)) last = i;
  }
  ASSERT_EQ(actions[last].kind, ActionKind::kBackwardWeight);
  const std::unique_ptr<ExchangeRun> run = RunExchanging(plan, /*stalled_rank=*/0, /*timeout=*/0.3);
  ASSERT_FALSE(run->result.ok());
  const std::string message = run->result.status().message();
  EXPECT_EQ(message.find("stalled: rank 0, action " + std::to_string(last)), 0u) << message;
  for (const char* waiting : {"; rank 1, end of step (the gradient-state exchange) waits for "
                              "every rank's gradient state",
                              "; rank 2, end of step (the gradient-state exchange) waits for "
                              "every rank's gradient state"}) {
    EXPECT_NE(message.find(waiting), std::string::npos) << message;
  }
}

// A dual-placement rank whose "gradients" are (its rank, the step): MirrorReceived records
// what the mirror sent, and the gradient-state exchange checks that the sum came first.
class Mirroring final : public testing::SyntheticWithState {
 public:
  Mirroring(const Plan& plan, RankId rank, bool stall)
      : SyntheticWithState(plan, rank, {.seconds_per_unit = 1e-5}),
        mirror_(plan.request.topology.ranks - 1 - rank.value),
        last_action_(Exchanging::LastCompute(plan.programs[rank.value])),
        stall_(stall) {}

  Status Run(const Action& action, const OpContext& context) override {
    if (stall_ && context.step == 1 && context.action_index == last_action_) {
      while (!context.stop.stop_requested())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return Aborted("stopped");
    }
    return SyntheticWithState::Run(action, context);
  }
  std::optional<RankId> GradientMirror() const override { return mirror_; }
  StatusOr<MirrorBuffers> MirrorGradientBuffers(const OpContext& context) override {
    mine_ = {double(rank().value), double(context.step)};
    theirs_ = {-1, -1};
    return MirrorBuffers{std::as_writable_bytes(std::span(mine_)),
                         std::as_writable_bytes(std::span(theirs_))};
  }
  Status MirrorReceived(const OpContext& /*context*/) override {
    received_.push_back(theirs_);
    return Status::Ok();
  }
  StatusOr<std::span<std::byte>> GradientStateBuffer(RankId rank,
                                                     const OpContext& context) override {
    if (rank == this->rank() && received_.size() != static_cast<size_t>(context.step) + 1) {
      return FailedPrecondition("the gradient state was asked for before the mirror's sum");
    }
    return SyntheticWithState::GradientStateBuffer(rank, context);
  }

  // Per step, what the mirror sent.
  const std::vector<std::array<double, 2>>& received() const { return received_; }

 private:
  RankId mirror_;
  size_t last_action_;
  bool stall_;
  std::array<double, 2> mine_{};
  std::array<double, 2> theirs_{};
  std::vector<std::array<double, 2>> received_;
};

StatusOr<std::vector<Timeline>> RunMirroring(const Plan& plan,
                                             std::vector<std::unique_ptr<Mirroring>>& executors,
                                             int stalled_rank, double timeout) {
  const int world = plan.request.topology.ranks;
  std::vector<OpExecutor*> raw_executors;
  for (int r = 0; r < world; ++r) {
    executors.push_back(std::make_unique<Mirroring>(plan, RankId(r), r == stalled_rank));
    raw_executors.push_back(executors.back().get());
  }
  return RunThreeSteps(plan, raw_executors, timeout);
}

TEST(GradientMirror, EachRankAddsWhatItsMirrorSentThatStepBeforeTheExchange) {
  const Plan plan = BuildOrFail(Request("dualpipe", 4, 2));
  std::vector<std::unique_ptr<Mirroring>> executors;
  const auto result = RunMirroring(plan, executors, /*stalled_rank=*/-1, /*timeout=*/30);
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(executors[r]->received().size(), 3u) << "rank " << r;
    for (int step = 0; step < 3; ++step) {
      const std::array<double, 2> want{double(3 - r), double(step)};
      EXPECT_EQ(executors[r]->received()[step], want) << "rank " << r << ", step " << step;
    }
  }
}

// Rank 1's last compute never ends: its mirror, rank 2, waits for it at the sum, and the
// watchdog names rank 1 and where rank 2 waits.
TEST(GradientMirror, ARankThatNeverGetsThereIsTheOneNamed) {
  const Plan plan = BuildOrFail(Request("dualpipe", 4, 2));
  std::vector<std::unique_ptr<Mirroring>> executors;
  const auto result = RunMirroring(plan, executors, /*stalled_rank=*/1, /*timeout=*/0.3);
  ASSERT_FALSE(result.ok());
  const std::string message = result.status().message();
  const size_t last = Exchanging::LastCompute(plan.programs[1]);
  EXPECT_EQ(message.find("stalled: rank 1, action " + std::to_string(last)), 0u) << message;
  EXPECT_NE(message.find("rank 2, end of step (the sum of the two model copies' gradients) "
                         "waits for the gradients of rank 1"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace pipeplan::runtime
