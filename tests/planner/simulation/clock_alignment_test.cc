// AlignRankClocks: skewed per-process clocks are shifted back into causal order with the
// least shift, causal timelines are left alone, and contradictory ones are not touched.
#include "pipeplan/simulation/clock_alignment.h"

#include <gtest/gtest.h>

#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan {
namespace {

// A simulated 1f1b step on 2 ranks. With zero comm time every receive that waited ends
// exactly when its send starts, so the tightest transfers pin the alignment.
struct Simulated {
  Plan plan;
  std::vector<RankTimeline> ranks;
};

Simulated SimulatedOneF1B(double latency = 0.0) {
  PlanRequest request;
  request.costs.boundaries.front().latency = latency;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 4;
  StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  StatusOr<Timeline> timeline = Simulate(*plan);
  EXPECT_TRUE(timeline.ok()) << timeline.status().message();
  return {*plan, timeline->ranks};
}

void ShiftRank(RankTimeline& rank, double by) {
  for (ActionTiming& timing : rank.actions) {
    timing.start += by;
    timing.end += by;
  }
}

void ExpectSameTimes(const RankTimeline& got, const RankTimeline& want, int rank) {
  ASSERT_EQ(got.actions.size(), want.actions.size());
  for (size_t i = 0; i < want.actions.size(); ++i) {
    EXPECT_NEAR(got.actions[i].start, want.actions[i].start, 1e-9) << "rank " << rank << " #" << i;
    EXPECT_NEAR(got.actions[i].end, want.actions[i].end, 1e-9) << "rank " << rank << " #" << i;
  }
}

TEST(AlignRankClocks, ARankWhoseClockStartedLateIsShiftedBackIntoPlace) {
  const Simulated truth = SimulatedOneF1B();
  std::vector<RankTimeline> skewed = truth.ranks;
  ShiftRank(skewed[1], -0.3);  // rank 1 left the barrier 0.3 units after rank 0
  const std::vector<double> offsets = AlignRankClocks(truth.plan, skewed);
  ASSERT_EQ(offsets.size(), 2u);
  EXPECT_DOUBLE_EQ(offsets[0], 0.0);
  EXPECT_NEAR(offsets[1], 0.3, 1e-9);
  ExpectSameTimes(skewed[0], truth.ranks[0], 0);
  ExpectSameTimes(skewed[1], truth.ranks[1], 1);
}

TEST(AlignRankClocks, AnEarlyClockShiftsTheOtherRankInstead) {
  const Simulated truth = SimulatedOneF1B();
  std::vector<RankTimeline> skewed = truth.ranks;
  ShiftRank(skewed[0], -0.5);  // rank 0's times read 0.5 too early
  const std::vector<double> offsets = AlignRankClocks(truth.plan, skewed);
  EXPECT_NEAR(offsets[0], 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(offsets[1], 0.0);
  ExpectSameTimes(skewed[0], truth.ranks[0], 0);
  ExpectSameTimes(skewed[1], truth.ranks[1], 1);
}

TEST(AlignRankClocks, CausalTimesAreLeftAlone) {
  const Simulated truth = SimulatedOneF1B(/*latency=*/0.5);
  std::vector<RankTimeline> ranks = truth.ranks;
  ShiftRank(ranks[1], 0.2);  // every transfer took 0.5: 0.2 either way stays causal
  const std::vector<RankTimeline> before = ranks;
  const std::vector<double> offsets = AlignRankClocks(truth.plan, ranks);
  EXPECT_EQ(offsets, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(ranks, before);
}

TEST(AlignRankClocks, ContradictoryTransfersLeaveTheTimesUntouched) {
  const Simulated truth = SimulatedOneF1B();
  std::vector<RankTimeline> ranks = truth.ranks;
  // Every receive on both ranks ends long before anything was sent: no shift fixes both
  // directions at once.
  for (RankTimeline& rank : ranks) {
    for (size_t i = 0; i < rank.actions.size(); ++i) {
      const ActionKind kind = truth.plan.programs[rank.rank.value].actions[i].kind;
      if (kind == ActionKind::kRecvForward || kind == ActionKind::kRecvBackward) {
        rank.actions[i].start = -100.0;
        rank.actions[i].end = -99.0;
      }
    }
  }
  const std::vector<RankTimeline> before = ranks;
  const std::vector<double> offsets = AlignRankClocks(truth.plan, ranks);
  EXPECT_EQ(offsets, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(ranks, before);
}

}  // namespace
}  // namespace pipeplan
