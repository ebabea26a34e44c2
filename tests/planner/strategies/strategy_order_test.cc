// Exact compute orders, derived by hand from the rules in docs/strategies.md.
#include <gtest/gtest.h>

#include "pipeplan/planner/normalize.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::ComputeString;
using testing::MakeRequest;

TEST(StrategyOrder, Gpipe) {
  const Plan plan = BuildOrDie(MakeRequest("gpipe", 2, 3));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0F2 0B0 0B1 0B2");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 1F1 1F2 1B0 1B1 1B2");
}

TEST(StrategyOrder, OneFOneB) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 3, 4));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3");
  EXPECT_EQ(ComputeString(plan, 2), "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3");
}

TEST(StrategyOrder, OneFOneBWithFewerMicrobatchesThanRanks) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 4, 2));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0B0 0B1");
  EXPECT_EQ(ComputeString(plan, 3), "3F0 3B0 3F1 3B1");
}

TEST(StrategyOrder, InterleavedOneFOneB) {
  const Plan plan = BuildOrDie(MakeRequest("interleaved-1f1b", 2, 4, 2));
  EXPECT_EQ(ComputeString(plan, 0),
            "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  EXPECT_EQ(ComputeString(plan, 1),
            "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
}

TEST(StrategyOrder, InterleavedGroupSizeChangesTheTable) {
  // G = 4 = M: one group; rank 1 warm-up = 2*0 + 1*4 = 4 forwards.
  PlanRequest request = MakeRequest("interleaved-1f1b", 2, 4, 2);
  request.options.microbatch_group_size = 4;
  const Plan plan = BuildOrDie(request);
  EXPECT_EQ(ComputeString(plan, 1),
            "1F0 1F1 1F2 1F3 3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 1B0 1B1 1B2 1B3");
}

TEST(StrategyOrder, LoopedBfs) {
  const Plan plan = BuildOrDie(MakeRequest("looped-bfs", 2, 2, 2));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0");
}

TEST(StrategyOrder, ZbH1) {
  const Plan plan = BuildOrDie(MakeRequest("zb-h1", 2, 3));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2");
}

TEST(StrategyOrder, ZbH2) {
  const Plan plan = BuildOrDie(MakeRequest("zb-h2", 2, 4));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 1I0 1F1 1I1 1F2 1I2 1W0 1F3 1I3 1W1 1W2 1W3");
}

TEST(StrategyOrder, InterleavedZeroBubble) {
  // mpr = 4 / max(1, 4 / 2) = 2; warm-up (V-1)mpr + P-1-r.
  const Plan plan = BuildOrDie(MakeRequest("interleaved-zb", 2, 4, 2));
  EXPECT_EQ(ComputeString(plan, 0),
            "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 2I3 2W3 0I2 "
            "0W2 0I3 0W3");
  EXPECT_EQ(ComputeString(plan, 1),
            "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1I2 3W3 "
            "1I3 1W2 1W3");
}

TEST(StrategyOrder, ZbvHandcrafted) {
  // V placement: rank 0 holds stages 0 and 3, rank 1 stages 1 and 2.
  const Plan plan = BuildOrDie(MakeRequest("zbv-handcrafted", 2, 3, 2));
  EXPECT_EQ(ComputeString(plan, 0),
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 3F2 3I2 3W2 0I1 0W1 0I2 0W2");
  EXPECT_EQ(ComputeString(plan, 1),
            "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2");
}

TEST(StrategyOrder, ZbvHandcraftedDropsMicrobatchesBeyondM) {
  // Built for n = max(2P-1, M) = 3, then every action of microbatch 2 is dropped.
  const Plan plan = BuildOrDie(MakeRequest("zbv-handcrafted", 2, 2, 2));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1");
}

TEST(StrategyOrder, DualPipeVFollowsTheEightSteps) {
  const Plan plan = BuildOrDie(MakeRequest("dualpipe-v", 2, 4, 2));
  EXPECT_EQ(ComputeString(plan, 0),
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1)OVERLAP_F_B (3F2;0B0)OVERLAP_F_B 3B2 "
            "(3F3;0B1)OVERLAP_F_B "
            "3B3 0I2 0W2 0I3 0W3");
  // The last rank issues its first F0&B1 as plain F0 then B1.
  EXPECT_EQ(ComputeString(plan, 1),
            "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0)OVERLAP_F_B (1F3;2B1)OVERLAP_F_B "
            "(2F3;1B1)OVERLAP_F_B 2B2 1B2 "
            "2I3 1I3 2W3 1W3");
}

TEST(StrategyOrder, DualPipeRunsBothCopiesOnEveryRank) {
  // P=2, M=4 (2 per copy). Copy A: stage 0 (rank 0) -> 1 (rank 1); copy B: stage 2 (rank 1)
  // -> 3 (rank 0). Both ranks are middle ranks; rank 1 swaps its chunks.
  const Plan plan = BuildOrDie(MakeRequest("dualpipe", 2, 4, 2));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 3F0 0F1 3B0 (3F1;0B0)OVERLAP_F_B 3B1 0I1 0W1");
  EXPECT_EQ(ComputeString(plan, 1), "2F0 1F0 2F1 1B0 (1F1;2B0)OVERLAP_F_B 1B1 2I1 2W1");
}

TEST(StrategyOrder, OneFOneBOverlap) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b-overlap", 2, 3));
  EXPECT_EQ(ComputeString(plan, 0), "0F0 0F1 0F2 0B0 0B1 0B2");
  EXPECT_EQ(ComputeString(plan, 1), "1F0 (1F1;1B0)OVERLAP_F_B (1F2;1B1)OVERLAP_F_B 1B2");
}

TEST(StrategyErrors, InvalidCombinationsAreClearErrors) {
  struct Case {
    PlanRequest request;
    std::string message;
  };
  PlanRequest bad_group = MakeRequest("interleaved-1f1b", 4, 8, 2);
  bad_group.options.microbatch_group_size = 3;
  PlanRequest ragged_group = MakeRequest("interleaved-1f1b", 4, 10, 2);
  PlanRequest group_on_1f1b = MakeRequest("1f1b", 4, 8);
  group_on_1f1b.options.microbatch_group_size = 4;
  const std::vector<Case> cases = {
      {MakeRequest("zb-h2", 4, 7),
       "zb-h2 needs at least 2P microbatches: P=4 needs M >= 8, got M=7"},
      {bad_group,
       "interleaved-1f1b: microbatch group size 3 with P=4, M=8 is invalid: need P <= G <= M"},
      {ragged_group,
       "interleaved-1f1b: microbatch group size 4 with P=4, M=10 is invalid: the last group has 2 "
       "microbatches; need M % G == 0 or M % G >= P"},
      {MakeRequest("interleaved-1f1b", 4, 8, 1),
       "interleaved-1f1b needs topology.stages_per_rank >= 2, got 1"},
      {MakeRequest("1f1b", 4, 8, 2), "1f1b supports topology.stages_per_rank <= 1, got 2"},
      {MakeRequest("nope", 4, 8),
       "unknown strategy 'nope' (known: gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, "
       "zb, "
       "zb-1p, zb-2p, interleaved-zb, zbv-handcrafted, zbv, v-half, v-min, dualpipe, dualpipe-v, "
       "1f1b-overlap, interleaved-1f1b-overlap, optimal, optimal-v, optimal-fb, auto)"},
      {MakeRequest("1f1b", 0, 8), "ranks must be in 1..4096, got 0"},
      {MakeRequest("1f1b", 4, 0), "microbatches must be in 1..65536, got 0"},
      {MakeRequest("interleaved-1f1b", 4096, 65536, 4),
       "P x V x M = 4096 x 4 x 65536 = 1073741824 (stage, microbatch) pairs, up to 3221225472 "
       "compute actions (F, I and W each), above the cap of 100000000 compute actions"},
      {group_on_1f1b, "options.microbatch_group_size applies to interleaved-1f1b only, not 1f1b"},
  };
  for (const Case& c : cases) {
    const StatusOr<Plan> plan = BuildPlan(c.request);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(plan.status().message(), c.message);
  }
}

// The cap is on 3 x P x V x M compute actions: 100 M. Checked without planning (huge).
TEST(StrategyErrors, ComputeActionCapIsExact) {
  const StatusOr<NormalizedRequest> at_cap = Normalize(MakeRequest("zb", 4096, 8138));
  EXPECT_TRUE(at_cap.ok()) << at_cap.status().message();  // 99999744 compute actions
  const StatusOr<NormalizedRequest> above = Normalize(MakeRequest("zb", 4096, 8139));
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(above.status().message(),
            "P x V x M = 4096 x 1 x 8139 = 33337344 (stage, microbatch) pairs, up to 100012032 "
            "compute actions (F, I and W each), above the cap of 100000000 compute actions");
}

TEST(StrategyErrors, MemoryLimitBelowThePlansPeakIsRefused) {
  PlanRequest request = MakeRequest("1f1b", 4, 8);
  request.memory.limit = 3.5;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(), "1f1b needs 4 memory on rank 0, above the memory limit 3.5");
  request.memory.limit = 4;
  EXPECT_TRUE(BuildPlan(request).ok());
}

}  // namespace
}  // namespace pipeplan
