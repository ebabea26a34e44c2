// Post-validation and rollback: the counts the reference heuristic gives for ZB-V, the shape
// of the PV chain, and the validator's view of flags and PV placement.
#include "pipeplan/passes/post_validation.h"

#include <gtest/gtest.h>

#include "pipeplan/checks/validator.h"
#include "pipeplan/model/plan_util.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;

struct ReferenceSetting {
  int ranks, microbatches;
  double f, i, w, comm, h, a;
};

// The settings of seed 001 (per-chunk costs, activation 34h+5as with s = 1024, W freeing 32h
// of it, default limit 2P chunk activations), plus its P=4 example.
const ReferenceSetting kSettings[] = {
    {4, 8, 6, 4, 4, 1, 4096, 32},
    {8, 24, 18522, 18086, 9337, 601, 2304, 24},
    {16, 48, 14407, 14380, 9676, 1610, 4096, 32},
    {24, 72, 6763, 6969, 5251, 755, 5120, 40},
    {32, 96, 9458, 9748, 7288, 879, 6144, 48},
};

PlanRequest ZbvRequest(const ReferenceSetting& s) {
  PlanRequest request = MakeRequest("zbv", s.ranks, s.microbatches, 2, s.f, s.i, s.w, s.comm);
  const double activation = 34 * s.h + 5 * s.a * 1024;
  request.memory.stages = {StageMemory{activation, activation - 32 * s.h}};
  request.options.post_validation = true;
  return request;
}

// Tagged receives per rank, counted on the plan.
std::vector<int> TaggedPerRank(const Plan& plan) {
  std::vector<int> tagged;
  for (const RankProgram& program : plan.programs) {
    int count = 0;
    for (const Action& a : program.actions) count += a.rollback ? 1 : 0;
    tagged.push_back(count);
  }
  return tagged;
}

TEST(PostValidation, ZbvTagsExactlyPMinusOneSquaredReceives) {
  for (const ReferenceSetting& s : kSettings) {
    const Plan plan = BuildOrDie(ZbvRequest(s));
    EXPECT_EQ(CountRollbackReceives(plan), (s.ranks - 1) * (s.ranks - 1)) << "P=" << s.ranks;
    // The reference heuristic tags 2(P-r)-1 receives on rank r >= 1 (rank 0 receives none).
    const std::vector<int> tagged = TaggedPerRank(plan);
    for (int r = 0; r < s.ranks; ++r) {
      EXPECT_EQ(tagged[r], r == 0 ? 0 : 2 * (s.ranks - r) - 1) << "P=" << s.ranks << " rank " << r;
    }
  }
}

TEST(PostValidation, ChainRunsFromTheLastRankToRankZero) {
  const Plan plan = BuildOrDie(ZbvRequest(kSettings[0]));
  const int last = static_cast<int>(plan.programs.size()) - 1;
  for (const RankProgram& program : plan.programs) {
    const int r = program.rank.value;
    int recv = 0, send = 0, pv = 0;
    for (const Action& a : program.actions) {
      if (a.kind == ActionKind::kRecvPostValidation) {
        ++recv;
        EXPECT_EQ(a.peer, RankId(r + 1));
      }
      if (a.kind == ActionKind::kSendPostValidation) {
        ++send;
        EXPECT_EQ(a.peer, RankId(r - 1));
      }
      if (a.kind == ActionKind::kPostValidation) {
        ++pv;
        EXPECT_EQ(recv, r == last ? 0 : 1)
            << "rank " << r << " validates before receiving the state";
      }
    }
    EXPECT_EQ(pv, 1);
    EXPECT_EQ(recv, r == last ? 0 : 1);
    EXPECT_EQ(send, r == 0 ? 0 : 1);
  }
}

TEST(PostValidation, OnlyForwardWorkPrecedesPv) {
  const Plan plan = BuildOrDie(ZbvRequest(kSettings[1]));
  for (const RankProgram& program : plan.programs) {
    for (const Action& a : program.actions) {
      if (a.kind == ActionKind::kPostValidation) break;
      EXPECT_TRUE(a.kind == ActionKind::kForward || a.kind == ActionKind::kSendForward ||
                  a.kind == ActionKind::kRecvForward || a.kind == ActionKind::kRecvPostValidation ||
                  a.kind == ActionKind::kSendPostValidation)
          << "rank " << program.rank.value << ": " << ToString(a) << " before PV";
    }
  }
}

TEST(PostValidation, ValidatorChecksTheRollbackFlags) {
  Plan plan = BuildOrDie(ZbvRequest(kSettings[0]));
  // Clear the first tagged receive on rank 1.
  auto& actions = plan.programs[1].actions;
  size_t index = 0;
  while (!actions[index].rollback) ++index;
  actions[index].rollback = false;
  const Status status = ValidatePlan(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "rank 1, action " + std::to_string(index) + " (" +
                                  ToString(actions[index]) +
                                  "): must be tagged rollback (its send precedes the sender's PV)");
}

TEST(PostValidation, RejectsRollbackFlagsWithoutPv) {
  Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2));
  plan.programs[1].actions[0].rollback = true;  // 1RECV_F0
  const Status status = ValidatePlan(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "rank 1, action 0 (1RECV_F0): rollback flag in a plan without post-validation");
}

TEST(PostValidation, OnlyTheZeroBubbleFamily) {
  PlanRequest request = MakeRequest("1f1b", 4, 8);
  request.options.post_validation = true;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(
      plan.status().message(),
      "options.post_validation applies to the zero-bubble family (zb-h1, zb-h2, zb, zb-1p, zb-2p, "
      "interleaved-zb, zbv-handcrafted, zbv, v-half, v-min), not 1f1b");
}

}  // namespace
}  // namespace pipeplan
