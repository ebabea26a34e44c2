// The zb strategy (ZB-1p / ZB-2p greedy scheduler, Zero Bubble paper ICLR 2024): reference
// figures of the paper, the memory limits of the presets and of --memory-limit, error texts,
// and robustness on degenerate inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::SimulateOrDie;

// 1.5B model of the paper: hidden 2304, 24 heads, sequence 1024. Activation per microbatch per
// stage is proportional to 34h + 5as; W frees 32h of it, I the rest.
constexpr double kHidden = 2304;
constexpr double kHeads = 24;
constexpr double kSeq = 1024;
constexpr double kActivation = 34 * kHidden + 5 * kHeads * kSeq;
constexpr double kFreedByInput = 2 * kHidden + 5 * kHeads * kSeq;

PlanRequest PaperRow(const std::string& strategy) {
  PlanRequest request = MakeRequest(strategy, 8, 24, 1, 18522, 18086, 9337, 601);
  request.memory.stages = {StageMemory{kActivation, kFreedByInput}};
  return request;
}

double Rate(const PlanRequest& request) {
  return SimulateOrDie(BuildOrDie(request)).metrics.zb_bubble_rate;
}

// The paper reports four decimals.
double RoundTo4(double value) { return std::round(value * 1e4) / 1e4; }

// Six stages with different costs, transfers and activation sizes.
PlanRequest NonUniform(const std::string& strategy, int microbatches) {
  PlanRequest request = MakeRequest(strategy, 6, microbatches);
  request.costs.stages.clear();
  request.memory.stages.clear();
  for (int s = 0; s < 6; ++s) {
    const double f = 10 + 3 * s;
    const double i = 12 - s;
    const double w = 4 + (s % 3) * 2;
    request.costs.stages.push_back(StageCosts{f, i + w, i, w, 0});
    request.memory.stages.push_back(StageMemory{1.0 + 0.5 * (s % 2), 0.3});
  }
  request.costs.boundaries.clear();
  for (int b = 0; b < 5; ++b) request.costs.boundaries.push_back(BoundaryCosts{0.5 + b, 0, 0});
  request.memory.static_per_rank = 7;
  return request;
}

// The activation of one microbatch on `rank`'s stage (V = 1: stage = rank).
double ActivationOf(const PlanRequest& request, int rank) {
  return request.memory.Activation(StageId(rank), 1);
}

TEST(ZbGreedy, ZeroBubblePaperRow) {
  const double zb1p = Rate(PaperRow("zb-1p"));
  const double zb2p = Rate(PaperRow("zb-2p"));
  // The paper's Table 4 row exactly, at its four decimals.
  EXPECT_DOUBLE_EQ(RoundTo4(zb1p), 0.1585) << zb1p;
  EXPECT_DOUBLE_EQ(RoundTo4(zb2p), 0.0433) << zb2p;
}

TEST(ZbGreedy, PresetsHoldPAnd2PActivations) {
  for (const PlanRequest& base :
       {PaperRow("zb-1p"), NonUniform("zb-1p", 20), NonUniform("zb-1p", 5),
        MakeRequest("zb-1p", 5, 40, 1, 3, 1, 2, 1)}) {
    for (const int preset : {1, 2}) {
      PlanRequest request = base;
      request.strategy = preset == 1 ? "zb-1p" : "zb-2p";
      const Timeline timeline = SimulateOrDie(BuildOrDie(request));
      const int ranks = request.topology.ranks;
      for (const RankTimeline& rank : timeline.ranks) {
        const double allowed = preset * ranks * ActivationOf(request, rank.rank.value);
        EXPECT_LE(rank.peak_activation_memory, allowed * (1 + 1e-12))
            << request.strategy << " rank " << rank.rank.value;
        EXPECT_NEAR(rank.peak_memory - rank.peak_activation_memory, request.memory.static_per_rank,
                    1e-9);
      }
    }
  }
}

TEST(ZbGreedy, TwoPRemovesMostOfOnePsBubbleWithNonUniformCosts) {
  const double zb1p = Rate(NonUniform("zb-1p", 24));
  const double zb2p = Rate(NonUniform("zb-2p", 24));
  EXPECT_LE(zb2p, zb1p);
  EXPECT_LT(zb1p, Rate(NonUniform("1f1b", 24)));
}

TEST(ZbGreedy, ExplicitLimitBetweenPresetsGivesRateBetweenThem) {
  const double zb1p = Rate(PaperRow("zb-1p"));
  const double zb2p = Rate(PaperRow("zb-2p"));
  for (const double activations : {10.0, 12.0, 14.0}) {
    PlanRequest request = PaperRow("zb");
    request.memory.static_per_rank = 1e6;
    request.memory.limit = request.memory.static_per_rank + activations * kActivation;
    const Timeline timeline = SimulateOrDie(BuildOrDie(request));
    EXPECT_LE(timeline.metrics.zb_bubble_rate, zb1p + 1e-12) << activations;
    EXPECT_GE(timeline.metrics.zb_bubble_rate, zb2p - 1e-12) << activations;
    for (const RankTimeline& rank : timeline.ranks) {
      EXPECT_LE(rank.peak_memory, *request.memory.limit)
          << activations << " rank " << rank.rank.value;
    }
  }
}

TEST(ZbGreedy, ExplicitLimitOverridesThePreset) {
  PlanRequest request = PaperRow("zb-2p");
  request.memory.limit = 8 * kActivation;
  const Timeline timeline = SimulateOrDie(BuildOrDie(request));
  for (const RankTimeline& rank : timeline.ranks) EXPECT_LE(rank.peak_memory, 8 * kActivation);
  EXPECT_DOUBLE_EQ(timeline.metrics.zb_bubble_rate, Rate(PaperRow("zb-1p")));
}

TEST(ZbGreedy, OneMicrobatchOfActivationIsEnough) {
  for (PlanRequest request :
       {NonUniform("zb", 9), MakeRequest("zb", 4, 8), MakeRequest("zb", 1, 3)}) {
    double largest = 0;
    for (int r = 0; r < request.topology.ranks; ++r) {
      largest = std::max(largest, ActivationOf(request, r));
    }
    request.memory.limit = request.memory.static_per_rank + largest;
    const Timeline timeline = SimulateOrDie(BuildOrDie(request));
    for (const RankTimeline& rank : timeline.ranks) {
      EXPECT_LE(rank.peak_memory, *request.memory.limit * (1 + 1e-12));
    }
  }
}

TEST(ZbGreedy, LimitBelowOneMicrobatchIsAClearError) {
  PlanRequest request = NonUniform("zb", 9);  // activations 1 and 1.5, static 7
  request.memory.limit = 8.2;
  StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "zb: memory limit 8.2 is too small; the smallest limit that works is 8.5 (static 7 + "
            "one microbatch's activation 1.5 on rank 1)");

  request.strategy = "zb-1p";
  request.memory.limit = 3;
  plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "zb-1p: memory limit 3 is too small; the smallest limit that works is 8.5 (static 7 + "
            "one microbatch's activation 1.5 on rank 1)");
}

TEST(ZbGreedy, ZbWithoutLimitPlansUnderOneFOneBsPeak) {
  const StatusOr<Plan> zb = BuildPlan(MakeRequest("zb", 4, 8));
  const StatusOr<Plan> zb1p = BuildPlan(MakeRequest("zb-1p", 4, 8));
  ASSERT_TRUE(zb.ok() && zb1p.ok()) << zb.status().message();
  EXPECT_EQ(zb->programs, zb1p->programs);
  for (const RankTimeline& rank : testing::SimulateOrDie(*zb).ranks) {
    EXPECT_LE(rank.peak_activation_memory, 4 + 1e-9);
  }
}

TEST(ZbGreedy, WithEnoughMemoryAndEqualCostsNoWorseThanZbH2) {
  for (auto [ranks, microbatches, comm] :
       {std::tuple{4, 8, 0.0}, std::tuple{4, 12, 0.0}, std::tuple{8, 24, 0.0},
        std::tuple{8, 24, 0.1}, std::tuple{6, 30, 0.25}}) {
    PlanRequest request = MakeRequest("zb", ranks, microbatches, 1, 1, 1, 1, comm);
    request.memory.limit = 3.0 * ranks;
    const double zb = Rate(request);
    request.memory.limit.reset();
    request.strategy = "zb-2p";
    const double zb2p = Rate(request);
    request.strategy = "zb-h2";
    const double zbh2 = Rate(request);
    EXPECT_LE(zb, zbh2 + 1e-12) << "P=" << ranks << " M=" << microbatches << " comm=" << comm;
    EXPECT_LE(zb2p, zbh2 + 1e-12) << "P=" << ranks << " M=" << microbatches << " comm=" << comm;
  }
}

TEST(ZbGreedy, Deterministic) {
  for (const PlanRequest& request :
       {PaperRow("zb-1p"), PaperRow("zb-2p"), NonUniform("zb-2p", 17)}) {
    const Plan first = BuildOrDie(request);
    const Plan second = BuildOrDie(request);
    EXPECT_EQ(first, second) << request.strategy;
    EXPECT_EQ(SimulateOrDie(first), SimulateOrDie(second)) << request.strategy;
  }
}

TEST(ZbGreedy, DegenerateInputsGiveValidPlans) {
  std::vector<PlanRequest> requests = {
      MakeRequest("zb-1p", 1, 1),
      MakeRequest("zb-2p", 1, 5),
      MakeRequest("zb-1p", 8, 1),
      MakeRequest("zb-2p", 8, 3),
      MakeRequest("zb-1p", 4, 8, 1, 0, 0, 0, 0),
      MakeRequest("zb-2p", 4, 8, 1, 1e300, 1e300, 1e300, 1e300),
      MakeRequest("zb-1p", 5, 9, 1, 1e-300, 1, 0, 1e12),
      NonUniform("zb-2p", 1),
      NonUniform("zb-1p", 2),
  };
  PlanRequest tight = MakeRequest("zb", 8, 16);
  tight.memory.stages = {StageMemory{1, 1}};  // I frees everything, W nothing
  tight.memory.limit = 1;
  requests.push_back(tight);
  PlanRequest keep_all = MakeRequest("zb", 3, 7);
  keep_all.memory.stages = {StageMemory{2, 0}};  // I frees nothing
  keep_all.memory.limit = 5;
  requests.push_back(keep_all);
  for (const PlanRequest& request : requests) {
    const StatusOr<Plan> plan = BuildPlan(request);
    ASSERT_TRUE(plan.ok()) << request.strategy << " P=" << request.topology.ranks
                           << " M=" << request.topology.microbatches << ": "
                           << plan.status().message();
    size_t computes = 0;
    for (const RankProgram& program : plan->programs) {
      for (const Action& action : program.actions) computes += IsCompute(action.kind) ? 1 : 0;
    }
    EXPECT_EQ(computes,
              static_cast<size_t>(3 * request.topology.ranks * request.topology.microbatches));
  }
}

TEST(ZbGreedy, OneRankRunsEachMicrobatchThrough) {
  const Plan plan = BuildOrDie(MakeRequest("zb-1p", 1, 3));
  EXPECT_EQ(testing::ComputeString(plan, 0), "0F0 0I0 0W0 0F1 0I1 0W1 0F2 0I2 0W2");
}

}  // namespace
}  // namespace pipeplan
