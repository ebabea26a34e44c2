// Comm insertion: exact programs for a small case (derived by hand), and the properties
// the pass promises on larger ones.
#include "pipeplan/passes/comm_insertion.h"

#include <gtest/gtest.h>

#include <map>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::ProgramString;

TEST(CommInsertion, OneFOneBTwoRanksExactPrograms) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2, 1, 1, 1, 1));
  EXPECT_EQ(ProgramString(plan, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1");
  EXPECT_EQ(ProgramString(plan, 1), "1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1");
  for (const Action& action : plan.programs[0].actions) {
    if (IsComm(action.kind)) {
      EXPECT_EQ(action.peer, RankId(1));
    }
  }
}

// Planned for torch's runtime, a receive is posted when its data is sent. List schedule: rank 0
// 0F0 [0,1] 0F1 [1,2] 0B0 [4,6] 0B1 [7,9]; rank 1 1F0 [1,2] 1B0 [2,4] 1F1 [4,5] 1B1 [5,7].
// 0F1's activation is sent at 2, when rank 1's next compute is 1B0: 1RECV_F1 goes before it,
// not before its consumer 1F1. The gradients land where their consumers start anyway.
TEST(CommInsertion, ForTorchReceivesArePostedWhenTheirDataIsSent) {
  PlanRequest request = MakeRequest("1f1b", 2, 2, 1, 1, 1, 1);
  request.runtime = Runtime::kTorch;
  const Plan plan = BuildOrDie(request);
  EXPECT_EQ(ProgramString(plan, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1");
  EXPECT_EQ(ProgramString(plan, 1), "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1");
}

TEST(CommInsertion, SameRankNeighboursHandOverWithoutComm) {
  // P = 1: every stage on rank 0, so no comm at all.
  const Plan plan = BuildOrDie(MakeRequest("looped-bfs", 1, 3, 4));
  for (const Action& action : plan.programs[0].actions) EXPECT_FALSE(IsComm(action.kind));
}

// When each message's data is ready (its producer's end), per comm action of a plan.
std::vector<std::vector<double>> ReadyTimes(const Plan& plan, const Timeline& t) {
  std::map<std::pair<int, int>, std::vector<double>> sent;  // (from, to) -> ready times in order
  std::vector<std::vector<double>> ready(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const auto& actions = plan.programs[r].actions;
    ready[r].assign(actions.size(), 0);
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionKind k = actions[i].kind;
      if (k == ActionKind::kSendForward || k == ActionKind::kSendBackward) {
        ready[r][i] = t.ranks[r].actions[i].start;
        sent[{static_cast<int>(r), actions[i].peer.value}].push_back(ready[r][i]);
      }
    }
  }
  std::map<std::pair<int, int>, size_t> taken;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionKind k = actions[i].kind;
      if (k != ActionKind::kRecvForward && k != ActionKind::kRecvBackward) continue;
      const std::pair<int, int> link{actions[i].peer.value, static_cast<int>(r)};
      ready[r][i] = sent[link][taken[link]++];
    }
  }
  return ready;
}

TEST(CommInsertion, CommIsSortedByReadinessAndEachReceiveIsAsLateAsThatAllows) {
  for (const char* strategy : {"1f1b", "zb-h1", "gpipe"}) {
    const Plan plan = BuildOrDie(MakeRequest(strategy, 4, 8, 1, 1, 1.5, 0.5, 0.1));
    const Timeline t = testing::SimulateOrDie(plan);
    const auto ready = ReadyTimes(plan, t);
    for (size_t r = 0; r < plan.programs.size(); ++r) {
      const auto& actions = plan.programs[r].actions;
      double last_ready = -1;
      for (size_t i = 0; i < actions.size(); ++i) {
        if (!IsComm(actions[i].kind)) continue;
        EXPECT_GE(ready[r][i], last_ready) << strategy << " rank " << r << " action " << i;
        last_ready = ready[r][i];
        if (actions[i].kind != ActionKind::kRecvForward &&
            actions[i].kind != ActionKind::kRecvBackward)
          continue;
        // Find the consumer; if computes stand between, a comm action after the first of them
        // must be what holds this receive back.
        size_t j = i + 1;
        bool crossed_compute = false;
        bool held_back = false;
        for (; j < actions.size(); ++j) {
          const Action& a = actions[j];
          if (IsCompute(a.kind) && a.stage == actions[i].stage &&
              a.microbatch == actions[i].microbatch &&
              (a.kind == ActionKind::kForward) == (actions[i].kind == ActionKind::kRecvForward)) {
            break;
          }
          if (IsCompute(a.kind)) crossed_compute = true;
          if (IsComm(a.kind) && crossed_compute) held_back = true;
        }
        ASSERT_LT(j, actions.size()) << "no consumer for " << ToString(actions[i]);
        EXPECT_TRUE(!crossed_compute || held_back) << strategy << ": " << ToString(actions[i])
                                                   << " on rank " << r << " is earlier than needed";
      }
    }
  }
}

TEST(CommInsertion, GlobalOrderIsALinearExtensionOfEveryRanksOrder) {
  const PlanRequest request = MakeRequest("interleaved-1f1b", 4, 8, 2);
  const Plan plan = BuildOrDie(request);
  ComputeOrder order(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    for (const Action& a : plan.programs[r].actions) {
      if (IsCompute(a.kind)) order[r].push_back(a);
    }
  }
  const StatusOr<std::vector<ComputeRef>> global =
      GlobalComputeOrder(order, StageMap(plan.request.topology), request.costs);
  ASSERT_TRUE(global.ok());
  std::vector<int> next(order.size(), 0);
  for (const ComputeRef& ref : *global) EXPECT_EQ(ref.index, next[ref.rank]++);
  for (size_t r = 0; r < order.size(); ++r) EXPECT_EQ(next[r], static_cast<int>(order[r].size()));
}

TEST(CommInsertion, AnOrderThatCannotFinishIsReportedWithTheStuckRanks) {
  const PlanRequest request = MakeRequest("1f1b", 2, 1);
  StageMap stages(request.topology);
  // Rank 1 runs its backward before its forward: the forward's input never "arrives" in time.
  ComputeOrder order = {
      {MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0)),
       MakeCompute(ActionKind::kBackward, StageId(0), MicrobatchId(0))},
      {MakeCompute(ActionKind::kBackward, StageId(1), MicrobatchId(0)),
       MakeCompute(ActionKind::kForward, StageId(1), MicrobatchId(0))},
  };
  const auto programs = InsertComm(order, stages, request.costs);
  ASSERT_FALSE(programs.ok());
  EXPECT_EQ(
      programs.status().message(),
      "the compute order cannot finish: rank 0 waits at compute action 1 (0B0) for B/I of stage 1 "
      "microbatch 0 (rank 1); rank 1 waits at compute action 0 (1B0) for F of stage 1 microbatch 0 "
      "(rank 1, later on this rank)");
}

}  // namespace
}  // namespace pipeplan
