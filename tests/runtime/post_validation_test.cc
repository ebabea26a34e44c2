// Post-validation at run time (op_executor.h's Validate, docs/runtime.md): the state goes
// along the ranks at the end of a step, a failed verdict drains the stale messages of the
// receives tagged rollback and runs the forwards before the PV again, with no message left
// over for the next step, and a plan whose failed validation could not be replayed is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::BuildOrFail;

// A synthetic rank (testing::SyntheticWithState) counting the forwards of each step and
// recording the gradient state EndStep finds; its PV fails at step `fail_at`.
class Recording final : public testing::SyntheticWithState {
 public:
  Recording(const Plan& plan, RankId rank, int fail_at, bool exchanges)
      : SyntheticWithState(plan, rank, {.seconds_per_unit = 1e-5, .fail_validation_at = fail_at}),
        exchanges_(exchanges) {}

  Status BeginStep(const OpContext& context) override {
    forwards_.push_back(0);
    return SyntheticWithState::BeginStep(context);
  }
  Status Run(const Action& action, const OpContext& context) override {
    if (action.kind == ActionKind::kForward) ++forwards_.back();
    return SyntheticWithState::Run(action, context);
  }
  bool ExchangesGradientState() const override { return exchanges_; }
  Status EndStep(const OpContext& context) override {
    ends_.push_back({context.speculative, states()});
    return SyntheticWithState::EndStep(context);
  }

  struct End {
    bool speculative;
    std::vector<std::array<double, 2>> states;
  };
  const std::vector<int>& forwards() const { return forwards_; }
  const std::vector<End>& ends() const { return ends_; }

 private:
  bool exchanges_;
  std::vector<int> forwards_;  // per step
  std::vector<End> ends_;
};

PlanRequest Request(const std::string& strategy, int ranks, int stages_per_rank) {
  return testing::SmallRequest(strategy, ranks, stages_per_rank, /*post_validation=*/true);
}

struct RecordedRun {
  std::vector<std::unique_ptr<Recording>> executors;
  Status status;
  std::vector<Timeline> steps;
};

// `step_barrier` false: steps follow each other without a barrier (LocalRunOptions), and
// post-validation's end-of-step sends are not waited before the next step.
RecordedRun RunRecorded(const Plan& plan, int steps, int fail_at, bool exchanges,
                        bool step_barrier) {
  const int world = plan.request.topology.ranks;
  RecordedRun run;
  std::vector<OpExecutor*> executors;
  for (int r = 0; r < world; ++r) {
    run.executors.push_back(std::make_unique<Recording>(plan, RankId(r), fail_at, exchanges));
    executors.push_back(run.executors.back().get());
  }
  auto transports = MakeInProcTransports(world);
  std::vector<Transport*> raw;
  raw.reserve(transports.size());
  for (auto& t : transports) raw.push_back(t.get());
  LocalRunOptions options;
  options.steps = steps;
  options.warmup = 0;
  options.timeout_seconds = 30;
  options.step_barrier = step_barrier;
  StatusOr<std::vector<Timeline>> steps_run = RunLocal(plan, executors, raw, options);
  run.status = steps_run.status();
  if (steps_run.ok()) run.steps = *std::move(steps_run);
  return run;
}

int CountForwards(const std::vector<Action>& actions, size_t end) {
  return static_cast<int>(
      std::count_if(actions.begin(), actions.begin() + static_cast<long>(end),
                    [](const Action& a) { return a.kind == ActionKind::kForward; }));
}

// The planner puts every receive tagged rollback before its rank's PV; a plan may also take
// one after it (its send still precedes the sender's PV): here rank 1's last one, sent by
// rank 0 in one group with its RECV_PV (so that the send blocks nothing).
Plan WithATaggedReceiveAfterThePv(Plan plan) {
  std::vector<Action>& sender = plan.programs[0].actions;
  const auto state = std::find_if(sender.begin(), sender.end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvPostValidation;
  });
  const auto last_send =
      std::find_if(std::make_reverse_iterator(state), sender.rend(),
                   [](const Action& a) { return a.kind == ActionKind::kSendForward; });
  if (state == sender.end() || last_send == sender.rend()) {
    ADD_FAILURE() << "rank 0 has no RECV_PV or no send before it";
    return plan;
  }
  const Action send = *last_send;
  sender.erase(std::next(last_send).base());
  sender.insert(
      std::find_if(sender.begin(), sender.end(),
                   [](const Action& a) { return a.kind == ActionKind::kRecvPostValidation; }),
      send);
  std::vector<Action>& actions = plan.programs[1].actions;
  const auto pv = std::find_if(actions.begin(), actions.end(), [](const Action& a) {
    return a.kind == ActionKind::kPostValidation;
  });
  const auto tagged = std::find_if(std::make_reverse_iterator(pv), actions.rend(),
                                   [](const Action& a) { return a.rollback; });
  if (pv == actions.end() || tagged == actions.rend()) {
    ADD_FAILURE() << "rank 1 has no PV or no receive tagged rollback before it";
    return plan;
  }
  const Action moved = *tagged;
  actions.erase(std::next(tagged).base());
  actions.insert(
      std::find_if(actions.begin(), actions.end(),
                   [](const Action& a) { return a.kind == ActionKind::kPostValidation; }) +
          1,
      moved);
  return plan;
}

// The failing step runs each rank's forwards before its PV twice; the step after it (its
// messages checked by the synthetic executor) finds no stale message left in any queue.
// With and without a barrier between steps (the second: step k + 1's messages may be
// posted while a peer is still in step k).
class WithAndWithoutStepBarrier : public ::testing::TestWithParam<bool> {};

TEST_P(WithAndWithoutStepBarrier, AFailedVerdictReplaysTheForwardsBeforeThePvAndLeavesNoMessage) {
  const Plan zbv = BuildOrFail(Request("zbv", 4, 2));
  for (const Plan& plan :
       {zbv, WithATaggedReceiveAfterThePv(zbv), BuildOrFail(Request("zb-h1", 3, 1)),
        BuildOrFail(Request("zb-h2", 4, 1))}) {
    const PlanRequest& request = plan.request;
    ASSERT_TRUE(CheckBeforeLaunch(plan).ok()) << CheckBeforeLaunch(plan).message();
    int replayed_anywhere = 0;
    for (int fail_at : {0, 1, 2}) {
      const RecordedRun run =
          RunRecorded(plan, /*steps=*/3, fail_at, /*exchanges=*/false, GetParam());
      ASSERT_TRUE(run.status.ok())
          << request.strategy << ", failing step " << fail_at << ": " << run.status.message();
      for (int r = 0; r < request.topology.ranks; ++r) {
        const std::vector<Action>& actions = plan.programs[r].actions;
        const PreparedProgram prepared(plan.programs[r]);
        const int all = CountForwards(actions, actions.size());
        const int before_pv = CountForwards(actions, prepared.replay_end());
        replayed_anywhere += before_pv;
        for (int step = 0; step < 3; ++step) {
          EXPECT_EQ(run.executors[r]->forwards()[step], all + (step == fail_at ? before_pv : 0))
              << request.strategy << ", rank " << r << ", step " << step << ", failing step "
              << fail_at;
          // The timeline keeps the first run of every action the replay ran again.
          const std::vector<DiscardedRun>& discarded = run.steps[step].ranks[r].discarded;
          EXPECT_EQ(discarded.size(), step == fail_at ? prepared.replay_end() : 0u)
              << request.strategy << ", rank " << r << ", step " << step;
          for (const DiscardedRun& first : discarded) {
            EXPECT_LT(first.action_index, prepared.replay_end());
            EXPECT_LE(first.timing.end,
                      run.steps[step].ranks[r].actions[first.action_index].start + 1e-9)
                << "the first run of action " << first.action_index << " ends before its replay";
          }
        }
      }
    }
    EXPECT_GT(replayed_anywhere, 0) << request.strategy << ": nothing ran before a PV";
  }
}

// Every step but the last ends with ranks 0..r's states on rank r (the last rank has them
// all) and a speculative EndStep; the last ends with the all-to-all exchange, exact.
TEST_P(WithAndWithoutStepBarrier, TheStateGoesAlongTheRanksAndTheLastStepIsExact) {
  const PlanRequest request = Request("zbv", 3, 2);
  const Plan plan = BuildOrFail(request);
  const RecordedRun run =
      RunRecorded(plan, /*steps=*/3, /*fail_at=*/-1, /*exchanges=*/true, GetParam());
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  for (int r = 0; r < 3; ++r) {
    const auto& ends = run.executors[r]->ends();
    ASSERT_EQ(ends.size(), 3u);
    for (int step = 0; step < 3; ++step) {
      const bool last = step == 2;
      EXPECT_EQ(ends[step].speculative, !last) << "rank " << r << ", step " << step;
      for (int q = 0; q < 3; ++q) {
        const std::array<double, 2> want = (last || q <= r)
                                               ? std::array<double, 2>{double(q), double(step)}
                                               : std::array<double, 2>{-1, -1};
        EXPECT_EQ(ends[step].states[q], want)
            << "rank " << r << ", step " << step << ", state of rank " << q;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PostValidationRun, WithAndWithoutStepBarrier, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "StepBarrier" : "NoStepBarrier";
                         });

// The last rank of a V runs its chunk-1 forward before its PV; its receiver's RECV_F is not
// tagged rollback (only chunk-0 receives are), so a replay would leave it a message short.
TEST(PostValidationRun, APlanWhoseFailedValidationCouldNotBeReplayedIsRefused) {
  const Plan planned = BuildOrFail(Request("zbv", 2, 2));
  ASSERT_TRUE(CheckBeforeLaunch(planned).ok()) << CheckBeforeLaunch(planned).message();
  Plan plan = planned;
  std::vector<Action>& last = plan.programs[1].actions;
  const auto pv = std::find_if(last.begin(), last.end(), [](const Action& a) {
    return a.kind == ActionKind::kPostValidation;
  });
  ASSERT_NE(pv, last.end());
  ASSERT_EQ((pv - 1)->kind, ActionKind::kSendPostValidation);
  const std::array<Action, 2> validation{*(pv - 1), *pv};
  last.erase(pv - 1, pv + 1);
  const auto chunk_one_send = std::find_if(last.begin(), last.end(), [](const Action& a) {
    return a.kind == ActionKind::kSendForward && a.stage == StageId(2);
  });
  ASSERT_NE(chunk_one_send, last.end());
  last.insert(chunk_one_send + 1, validation.begin(), validation.end());
  // Rank 0 takes that activation before the state, in the order they are sent.
  std::vector<Action>& first = plan.programs[0].actions;
  const auto receive = std::find_if(first.begin(), first.end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvForward && a.stage == StageId(3) && a.microbatch.value == 0;
  });
  ASSERT_NE(receive, first.end());
  const Action moved = *receive;
  first.erase(receive);
  const auto state = std::find_if(first.begin(), first.end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvPostValidation;
  });
  first.insert(state, moved);
  const Status status = CheckBeforeLaunch(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank 1, action"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("not tagged rollback"), std::string::npos) << status.message();
}

// A replay runs everything before the RECV_PV and SEND_PV that open the PV again; one that
// came earlier would be run twice.
TEST(PostValidationRun, AStateReceivedBeforeTheLastForwardsBeforeThePvIsRefused) {
  Plan plan = BuildOrFail(Request("zbv", 2, 2));
  std::vector<Action>& first = plan.programs[0].actions;
  const auto state = std::find_if(first.begin(), first.end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvPostValidation;
  });
  ASSERT_NE(state, first.end());
  ASSERT_NE(state, first.begin());
  ASSERT_EQ(std::prev(state)->kind, ActionKind::kForward);
  std::iter_swap(state, std::prev(state));
  const Status status = CheckBeforeLaunch(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("RECV_PV"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("must come right before its rank's PV"), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace pipeplan::runtime
