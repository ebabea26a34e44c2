// Validator and dry run: hand-edited plans, each with the exact message a user must see.
#include "pipeplan/checks/validator.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;

// 1F1B, P=2, M=2: rank 0 "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
// rank 1 "1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1".
Plan SmallPlan() { return BuildOrDie(MakeRequest("1f1b", 2, 2)); }

Action Comm(ActionKind kind, int stage, int mb, int peer) {
  Action action = MakeCompute(kind, StageId(stage), MicrobatchId(mb));
  action.peer = RankId(peer);
  return action;
}

std::string Error(const Plan& plan) {
  const Status status = ValidatePlan(plan);
  EXPECT_FALSE(status.ok());
  return status.message();
}

TEST(Validator, BuiltPlansAreValid) { EXPECT_TRUE(ValidatePlan(SmallPlan()).ok()); }

TEST(Validator, BackwardBeforeForward) {
  Plan plan = SmallPlan();
  std::swap(plan.programs[1].actions[1], plan.programs[1].actions[2]);
  EXPECT_EQ(Error(plan), "rank 1, action 1 (1B0): backward before forward");
}

TEST(Validator, MissingBackward) {
  Plan plan = SmallPlan();
  plan.programs[0].actions.pop_back();
  EXPECT_EQ(Error(plan), "stage 0 microbatch 1 (rank 0) has no backward");
}

// Regression (fuzzing, issue 7): a 20 KB binary plan file declaring P=4096 V=64 M=65536 with
// empty programs made the validator allocate a table of 2^34 (stage, microbatch) cells, and
// 'pipeplan simulate' abort with std::bad_alloc. The topology's cap on P x V x M refuses it
// now; below the cap the completeness check does, still before any table.
TEST(Validator, PlanFarSmallerThanItsTopologyIsRefusedBeforeItsTables) {
  Plan plan;
  plan.request.topology = {.ranks = 4096, .stages_per_rank = 64, .microbatches = 65536};
  for (int r = 0; r < 4096; ++r) plan.programs.push_back({.rank = RankId(r), .actions = {}});
  plan.programs[0].actions.push_back(
      MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0)));
  EXPECT_EQ(Error(plan),
            "P x V x M = 4096 x 64 x 65536 = 17179869184 (stage, microbatch) pairs, up to "
            "51539607552 compute actions (F, I and W each), above the cap of 100000000 compute "
            "actions");

  plan.request.topology = {.ranks = 4096, .stages_per_rank = 2, .microbatches = 2048};
  EXPECT_EQ(Error(plan),
            "the plan is incomplete: P=4096 V=2 M=2048 has 16777216 (stage, microbatch) "
            "pairs, each needing a forward and a backward, but the plan has only 1 compute "
            "operation");
}

TEST(Validator, StageOnTheWrongRank) {
  Plan plan = SmallPlan();
  plan.programs[0].actions[0].stage = StageId(1);
  EXPECT_EQ(Error(plan), "rank 0, action 0 (1F0): stage 1 belongs to rank 1");
}

TEST(Validator, MicrobatchOutOfRange) {
  Plan plan = SmallPlan();
  plan.programs[0].actions[2].microbatch = MicrobatchId(7);
  EXPECT_EQ(Error(plan), "rank 0, action 2 (0F7): microbatch 7 out of range 0..1");
}

TEST(Validator, WeightBeforeInput) {
  Plan plan = BuildOrDie(MakeRequest("zb-h1", 2, 2));
  // rank 1 starts "1RECV_F0 1F0 1I0 ..."; make its I a W.
  plan.programs[1].actions[2].kind = ActionKind::kBackwardWeight;
  EXPECT_EQ(Error(plan), "rank 1, action 2 (1W0): weight backward before input backward");
}

TEST(Validator, ReceivesOutOfSendOrder) {
  Plan plan = SmallPlan();
  // rank 0: 0F0 0F1 0SEND_F1 0SEND_F0 ...: both sends follow their forwards, wrong order.
  plan.programs[0].actions = {MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0)),
                              MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(1)),
                              Comm(ActionKind::kSendForward, 0, 1, 1),
                              Comm(ActionKind::kSendForward, 0, 0, 1),
                              Comm(ActionKind::kRecvBackward, 0, 0, 1),
                              MakeCompute(ActionKind::kBackward, StageId(0), MicrobatchId(0)),
                              Comm(ActionKind::kRecvBackward, 0, 1, 1),
                              MakeCompute(ActionKind::kBackward, StageId(0), MicrobatchId(1))};
  EXPECT_EQ(
      Error(plan),
      "rank 0 -> rank 1: send #0 is rank 0, action 2 (0SEND_F1) but receive #0 is rank 1, action 0 "
      "(1RECV_F0); receives must come in the order of the sends");
}

TEST(Validator, ForwardWithoutReceive) {
  Plan plan = SmallPlan();
  plan.programs[1].actions.erase(plan.programs[1].actions.begin());
  EXPECT_EQ(Error(plan), "rank 1, action 0 (1F0): forward without a RECV_F of its input before it");
}

// zbv at P=2 puts stages 1 and 2 on rank 1: 2's gradient reaches 1 in memory, so stage 1's
// backward of a microbatch must follow stage 2's on that rank (a fuzzer's plan put it before;
// the simulator then found the rank waiting on itself).
size_t IndexOf(const RankProgram& program, ActionKind kind, int stage, int mb) {
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& a = program.actions[i];
    if (a.kind == kind && a.stage.value == stage && a.microbatch.value == mb) return i;
  }
  ADD_FAILURE() << "no such action";
  return 0;
}

// The zbv plan (P=2, M=4) with rank 1's two actions of `kind` on (first_stage, mb) and
// (second_stage, mb) swapped; the index where the second now stands.
struct Swapped {
  Plan plan;
  size_t at;
};
Swapped SwapOnRankOne(ActionKind kind, int first_stage, int second_stage, int mb) {
  Swapped out{BuildOrDie(MakeRequest("zbv", 2, 4, 2)), 0};
  RankProgram& rank1 = out.plan.programs[1];
  out.at = IndexOf(rank1, kind, first_stage, mb);
  const size_t second = IndexOf(rank1, kind, second_stage, mb);
  EXPECT_LT(out.at, second);
  std::swap(rank1.actions[out.at], rank1.actions[second]);
  return out;
}

TEST(Validator, LocalHandOverInTheWrongOrder) {
  const Swapped backward = SwapOnRankOne(ActionKind::kBackwardInput, 2, 1, 3);
  EXPECT_EQ(Error(backward.plan), "rank 1, action " + std::to_string(backward.at) +
                                      " (1I3): needs the backward of stage 2 microbatch 3, which "
                                      "this rank runs later (a local hand-over must come first)");
  const Swapped forward = SwapOnRankOne(ActionKind::kForward, 1, 2, 0);
  EXPECT_EQ(Error(forward.plan), "rank 1, action " + std::to_string(forward.at) +
                                     " (2F0): needs the forward of stage 1 microbatch 0, which "
                                     "this rank runs later (a local hand-over must come first)");
}

TEST(Validator, SendToTheWrongPeer) {
  Plan plan = BuildOrDie(MakeRequest("1f1b", 3, 2));
  plan.programs[0].actions[1].peer = RankId(2);
  EXPECT_EQ(Error(plan), "rank 0, action 1 (0SEND_F0): peer is rank 2 but stage 1 is on rank 1");
}

TEST(Validator, ProgramsOutOfRankOrder) {
  Plan plan = SmallPlan();
  std::swap(plan.programs[0], plan.programs[1]);
  EXPECT_EQ(Error(plan), "program 0 is labelled rank 1; programs must be in rank order");
}

TEST(DryRun, ReceivingBeforeSendingDeadlocks) {
  Plan plan = SmallPlan();
  plan.programs[0].actions = {MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0)),
                              Comm(ActionKind::kSendForward, 0, 0, 1),
                              MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(1)),
                              Comm(ActionKind::kRecvBackward, 0, 0, 1),
                              MakeCompute(ActionKind::kBackward, StageId(0), MicrobatchId(0)),
                              Comm(ActionKind::kSendForward, 0, 1, 1),
                              Comm(ActionKind::kRecvBackward, 0, 1, 1),
                              MakeCompute(ActionKind::kBackward, StageId(0), MicrobatchId(1))};
  plan.programs[1].actions = {Comm(ActionKind::kRecvForward, 1, 0, 0),
                              MakeCompute(ActionKind::kForward, StageId(1), MicrobatchId(0)),
                              Comm(ActionKind::kRecvForward, 1, 1, 0),
                              MakeCompute(ActionKind::kBackward, StageId(1), MicrobatchId(0)),
                              Comm(ActionKind::kSendBackward, 1, 0, 0),
                              MakeCompute(ActionKind::kForward, StageId(1), MicrobatchId(1)),
                              MakeCompute(ActionKind::kBackward, StageId(1), MicrobatchId(1)),
                              Comm(ActionKind::kSendBackward, 1, 1, 0)};
  EXPECT_EQ(
      Error(plan),
      "deadlock: rank 0, action 3 (0RECV_B0) waits for rank 1; rank 1, action 2 (1RECV_F1) waits "
      "for rank 0");
}

TEST(DryRun, ConsecutiveCommActionsFormOneGroup) {
  // 1F1B's steady state needs "send F, receive B" and "send B, receive F" as groups.
  EXPECT_TRUE(DryRun(BuildOrDie(MakeRequest("1f1b", 4, 8))).ok());
}

}  // namespace
}  // namespace pipeplan
