// The end-of-step gradient-state exchange (op_executor.h): every rank's EndStep sees every
// other rank's state of that same step; a rank slow to reach the exchange holds the others up
// without failing them; one that never reaches it is the one the watchdog names.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
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
  auto transports = MakeInProcTransports(world);
  std::vector<Transport*> raw;
  raw.reserve(transports.size());
  for (auto& t : transports) raw.push_back(t.get());
  LocalRunOptions options;
  options.steps = 2;
  options.warmup = 1;
  options.timeout_seconds = timeout;
  run->result = RunLocal(plan, executors, raw, options);
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

}  // namespace
}  // namespace pipeplan::runtime
