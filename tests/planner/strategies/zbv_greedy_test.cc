// The zbv strategy: the zero-bubble V-shape greedy heuristic under a memory limit
// (reference: seed 001_efdd2fa0a0a29e03, PipelineGraph.try_v_schedule / get_v_schedule).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::ComputeString;
using testing::MakeRequest;
using testing::SimulateOrDie;

// One row of the settings at the bottom of the seed: P, M, per-chunk costs f, b (= I), w,
// comm c, hidden size h and heads a (sequence length s = 1024), and the reference's bubble
// rate. Activation per chunk is 34h + 5as; W frees 32h of it, so I frees 2h + 5as. Memory
// limit 2P chunk activations (the seed's m_offset = 0).
struct SeedSetting {
  int p;
  int m;
  double f;
  double b;
  double w;
  double c;
  double h;
  double a;
  // Printed by the reference heuristic (the seed's code, reconstructed as runnable Python
  // outside the repo) as max_bubble / (expected_time + max_bubble), to 12 decimals.
  double reference_bubble_rate;
};

constexpr double kSeqLength = 1024;

const SeedSetting kSeedSettings[] = {
    {16, 48, 14407, 14380, 9676, 1610, 4096, 32, 0.069724178467},
    {16, 64, 14412, 14393, 9688, 1621, 4096, 32, 0.053343096227},
    {16, 128, 14316, 14306, 9639, 1619, 4096, 32, 0.027428230650},
    {24, 72, 6763, 6969, 5251, 755, 5120, 40, 0.063805886318},
    {24, 96, 6783, 6984, 5259, 758, 5120, 40, 0.048291558461},
    {24, 192, 6785, 6990, 5260, 770, 5120, 40, 0.024958831035},
    {32, 96, 9458, 9748, 7288, 879, 6144, 48, 0.059287900161},
    {32, 128, 9469, 9744, 7306, 892, 6144, 48, 0.045106371008},
    {32, 256, 9447, 9644, 7193, 887, 6144, 48, 0.023585885849},
};

double ChunkActivation(const SeedSetting& s) { return 34 * s.h + 5 * s.a * kSeqLength; }

PlanRequest SeedRequest(const SeedSetting& s, double limit_chunks) {
  PlanRequest request = MakeRequest("zbv", s.p, s.m, 2, s.f, s.b, s.w, s.c);
  request.memory.stages = {StageMemory{ChunkActivation(s), 2 * s.h + 5 * s.a * kSeqLength}};
  request.memory.limit = limit_chunks * ChunkActivation(s);
  return request;
}

TEST(ZbvGreedy, ZeroBubbleWithEqualCostsAndEnoughMicrobatches) {
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 3 * p}) {
      const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("zbv", p, m, 2)));
      EXPECT_DOUBLE_EQ(t.metrics.zb_bubble_rate, 0) << "P=" << p << " M=" << m;
    }
  }
}

// The reference's order for P=4, M=8 with unit costs (F = I = W = 1), no comm, default
// memory (I frees nothing) and its default limit (2P chunk activations), stage by stage.
TEST(ZbvGreedy, OrderEqualsReferenceForFourRanks) {
  const Plan plan = BuildOrDie(MakeRequest("zbv", 4, 8, 2));
  const std::vector<std::string> expected = {
      "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 7I3 7W3 0F7 0I0 0W0 "
      "7F4 7I4 7W4 0I1 0W1 7F5 7I5 7W5 0I2 0W2 7F6 7I6 7W6 0I3 0W3 7F7 7I7 0I4 7W7 0I5 0W4 0I6 "
      "0W5 0I7 0W6 0W7",
      "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 6I2 6W2 1F6 1I0 1W0 6F4 6I3 6W3 "
      "1F7 1I1 1W1 6F5 6I4 6W4 1I2 1W2 6F6 6I5 6W5 1I3 1W3 6F7 6I6 1I4 6I7 1I5 6W6 1I6 1W4 1I7 "
      "6W7 1W5 1W6 1W7",
      "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 5I1 5W1 2F5 2I0 2W0 5F4 5I2 5W2 2F6 2I1 2W1 "
      "5F5 5I3 5W3 2F7 2I2 2W2 5F6 5I4 5W4 2I3 2W3 5F7 5I5 2I4 5I6 2I5 5I7 2I6 5W5 2I7 2W4 5W6 "
      "2W5 5W7 2W6 2W7",
      "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4I0 4W0 3F4 3I0 3W0 4F4 4I1 4W1 3F5 3I1 3W1 4F5 4I2 4W2 "
      "3F6 3I2 3W2 4F6 4I3 4W3 3F7 3I3 3W3 4F7 4I4 3I4 4I5 3I5 4I6 3I6 4I7 3I7 4W4 3W4 4W5 3W5 "
      "4W6 3W6 4W7 3W7",
  };
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ComputeString(plan, rank), expected[rank]) << "rank " << rank;
  }
}

// Every setting of the seed: our bubble rate is the reference heuristic's (the orders are the
// reference's own, so the figures agree to rounding).
TEST(ZbvGreedy, EqualsTheReferenceOnSeedSettings) {
  for (const SeedSetting& s : kSeedSettings) {
    const Timeline t = SimulateOrDie(BuildOrDie(SeedRequest(s, 2 * s.p)));
    EXPECT_NEAR(t.metrics.zb_bubble_rate, s.reference_bubble_rate, 1e-9)
        << "P=" << s.p << " M=" << s.m;
  }
}

TEST(ZbvGreedy, PeakMemoryWithinLimit) {
  const SeedSetting& s = kSeedSettings[0];
  for (const int chunks : {2 * s.p, 2 * s.p - 2, s.p}) {
    const PlanRequest request = SeedRequest(s, chunks);
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    EXPECT_LE(PeakMemory(t), *request.memory.limit) << chunks << " chunk activations";
  }
}

// BuildOrDie validates the plan: every (stage, microbatch) has its F, I and W in order.
TEST(ZbvGreedy, TighterLimitStillSchedulesEveryActionAndCostsTime) {
  const PlanRequest unlimited = MakeRequest("zbv", 8, 24, 2);
  PlanRequest request = unlimited;
  request.memory.limit = (2 * 8 - 2) * 0.5;  // 2P-2 chunk activations of 1/V
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  EXPECT_LE(PeakMemory(t), *request.memory.limit);
  EXPECT_GT(t.metrics.zb_bubble_rate, 0);
  EXPECT_GT(t.metrics.makespan, SimulateOrDie(BuildOrDie(unlimited)).metrics.makespan);
}

// Per-stage costs, activations, comm and static memory: the explicit limit and the default
// one (static + 2P x the larger chunk activation of each rank) both hold on every rank.
PlanRequest NonUniformRequest(int p, int m) {
  PlanRequest request = MakeRequest("zbv", p, m, 2);
  request.costs.stages.clear();
  request.memory.stages.clear();
  request.costs.boundaries.clear();
  for (int s = 0; s < 2 * p; ++s) {
    const double f = 1.0 + 0.25 * (s % 3);
    const double i = 1.1 + 0.2 * (s % 4);
    const double w = 0.6 + 0.3 * (s % 2);
    request.costs.stages.push_back(StageCosts{f, i + w, i, w, 0});
    request.memory.stages.push_back(StageMemory{2.0 + s % 5, 0.5 + 0.25 * (s % 3)});
    if (s + 1 < 2 * p) request.costs.boundaries.push_back(BoundaryCosts{0.05 * (1 + s % 3), 0, 0});
  }
  request.memory.static_per_rank = 10;
  return request;
}

TEST(ZbvGreedy, NonUniformCostsAndMemoryStayWithinLimits) {
  const int p = 6;
  const int m = 18;
  PlanRequest request = NonUniformRequest(p, m);
  {
    const Plan plan = BuildOrDie(request);
    const Timeline t = SimulateOrDie(plan);
    const StageMap stages(plan.request.topology);
    for (const RankTimeline& rank : t.ranks) {
      double largest = 0;
      for (StageId stage : stages.StagesOf(rank.rank)) {
        largest = std::max(largest, request.memory.stages[stage.value].activation);
      }
      EXPECT_LE(rank.peak_memory, 10 + 2 * p * largest) << "rank " << rank.rank.value;
    }
  }
  for (const double limit : {10.0 + 2 * p * 6, 10.0 + 2 * p * 4}) {
    request.memory.limit = limit;
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    EXPECT_LE(PeakMemory(t), limit);
  }
}

TEST(ZbvGreedy, ChunkZeroIsStageRAndChunkOneIsStageTwoPMinusOneMinusR) {
  const Plan plan = BuildOrDie(NonUniformRequest(4, 8));
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (!IsCompute(action.kind)) continue;
      const int stage = action.stage.value;
      EXPECT_TRUE(stage == program.rank.value || stage == 7 - program.rank.value)
          << "rank " << program.rank.value << ": " << ToString(action);
    }
  }
}

TEST(ZbvGreedy, InfeasibleLimitNamesTheSmallestThatWorks) {
  PlanRequest request = MakeRequest("zbv", 4, 8, 2);
  request.memory.limit = 0.5;  // one chunk activation: rank 3 must hold both of its chunks
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "zbv: memory limit 0.5 is too small for P=4, M=8 (the greedy V schedule gets stuck); "
            "the smallest limit that works is 1 (static 0 + 2 chunk activations of 0.5)");
}

TEST(ZbvGreedy, LimitBelowStaticMemoryIsAnError) {
  PlanRequest request = MakeRequest("zbv", 2, 4, 2);
  request.memory.static_per_rank = 10;
  request.memory.limit = 9;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "zbv: memory limit 9 is too small for P=2, M=4 (the greedy V schedule gets stuck); "
            "the smallest limit that works is 11 (static 10 + 2 chunk activations of 0.5)");
}

// Unit F, I and W, transfers of 0.5. One rank runs its 6M passes back to back. With one
// microbatch the step is its critical path: down the V and back (4P passes), 4(P-1)
// transfers, and rank 0's last W, 6P - 1; the other ranks' W's fit in their idle. With more,
// neither the work nor that path can be beaten.
TEST(ZbvGreedy, FewMicrobatchesAndOneRank) {
  for (const auto& [p, m] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 4}, {2, 1}, {4, 1}, {4, 2}, {8, 3}}) {
    const Plan plan = BuildOrDie(MakeRequest("zbv", p, m, 2, 1, 1, 1, 0.5));
    const double makespan = SimulateOrDie(plan).metrics.makespan;
    const double critical_path = 4 * p + 4 * (p - 1) * 0.5 + 1;
    if (p == 1) {
      EXPECT_DOUBLE_EQ(makespan, 6 * m) << "M=" << m;
    } else if (m == 1) {
      EXPECT_DOUBLE_EQ(makespan, critical_path) << "P=" << p;
    } else {
      EXPECT_GE(makespan, std::max<double>(6 * m, critical_path)) << "P=" << p << " M=" << m;
    }
  }
}

TEST(ZbvGreedy, Deterministic) {
  const PlanRequest request = NonUniformRequest(8, 24);
  EXPECT_EQ(BuildOrDie(request), BuildOrDie(request));
  const PlanRequest seed = SeedRequest(kSeedSettings[0], 30);
  EXPECT_EQ(BuildOrDie(seed), BuildOrDie(seed));
}

}  // namespace
}  // namespace pipeplan
