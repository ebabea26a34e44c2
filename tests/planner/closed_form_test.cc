// Closed forms and public reference numbers from docs/strategies.md.
#include <gtest/gtest.h>

#include <tuple>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::SimulateOrDie;

double Makespan(const PlanRequest& request) {
  return SimulateOrDie(BuildOrDie(request)).metrics.makespan;
}

TEST(ClosedForm, OneFOneBMakespanIsMPlusPMinusOneTimesFPlusB) {
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      const double f = 1.5;
      const double i = 1.25;
      const double w = 0.75;
      EXPECT_DOUBLE_EQ(Makespan(MakeRequest("1f1b", p, m, 1, f, i, w)), (m + p - 1) * (f + i + w))
          << "P=" << p << " M=" << m;
    }
  }
}

TEST(ClosedForm, ZbH1BubbleIsPMinusOneTimesFPlusIMinusW) {
  for (int p : {2, 4, 8}) {
    const int m = 3 * p;
    const double f = 3, i = 2, w = 1;
    const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("zb-h1", p, m, 1, f, i, w)));
    EXPECT_DOUBLE_EQ(t.metrics.makespan - m * (f + i + w), (p - 1) * (f + i - w)) << "P=" << p;
  }
}

TEST(ClosedForm, ZbH2BubbleIsPMinusOneTimesFPlusIMinus2W) {
  for (int p : {2, 4, 8}) {
    const int m = 3 * p;
    const double f = 4, i = 3, w = 1;  // F + I - 2W > 0
    const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("zb-h2", p, m, 1, f, i, w)));
    EXPECT_DOUBLE_EQ(t.metrics.makespan - m * (f + i + w), (p - 1) * (f + i - 2 * w)) << "P=" << p;
  }
}

TEST(ClosedForm, ZbH1AndH2ActivationMemory) {
  const int p = 4;
  const Timeline h1 = SimulateOrDie(BuildOrDie(MakeRequest("zb-h1", p, 12)));
  const Timeline h2 = SimulateOrDie(BuildOrDie(MakeRequest("zb-h2", p, 12)));
  EXPECT_DOUBLE_EQ(h1.ranks[0].peak_activation_memory, p);
  EXPECT_DOUBLE_EQ(h2.ranks[0].peak_activation_memory, 2 * p - 1);
}

TEST(ClosedForm, UnitCostReferenceFigures) {
  EXPECT_DOUBLE_EQ(Makespan(MakeRequest("1f1b", 4, 8)), 33);
  EXPECT_DOUBLE_EQ(Makespan(MakeRequest("zb-h1", 4, 8)), 27);
  EXPECT_DOUBLE_EQ(Makespan(MakeRequest("interleaved-1f1b", 4, 8, 2)), 57);
}

// Zero Bubble paper (ICLR 2024), 1.5B model, P=8, M=24, costs in microseconds.
TEST(ClosedForm, ZeroBubblePaperRow) {
  auto rate = [](const char* strategy) {
    const PlanRequest request = MakeRequest(strategy, 8, 24, 1, 18522, 18086, 9337, 601);
    return SimulateOrDie(BuildOrDie(request)).metrics.zb_bubble_rate;
  };
  EXPECT_NEAR(rate("1f1b"), 0.2431, 5e-5);
  EXPECT_NEAR(rate("zb-h1"), 0.1585, 5e-5);
  EXPECT_NEAR(rate("zb-h2"), 0.1083, 5e-5);
}

}  // namespace
}  // namespace pipeplan

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::SimulateOrDie;

// Unit costs per chunk F=1, B=2 (I=W=1), one F&B cell 3: DeepSeek's bubble
// (P'/2 - 1)(F&B + B - 3W) = 6 idle time on every rank, makespan 66.
TEST(ClosedForm, DualPipeFamilyUnitCostFigures) {
  for (auto [strategy, ranks, microbatches] :
       {std::tuple{"dualpipe", 8, 20}, std::tuple{"dualpipe-v", 4, 10}}) {
    PlanRequest request = MakeRequest(strategy, ranks, microbatches, 2);
    request.costs.stages[0].overlap = 3;
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    EXPECT_DOUBLE_EQ(t.metrics.makespan, 66) << strategy;
    for (const RankTimeline& rank : t.ranks) {
      EXPECT_DOUBLE_EQ(t.metrics.makespan - rank.busy, 6)
          << strategy << " rank " << rank.rank.value;
    }
  }
}

// DeepSeek's table: DualPipe holds P+1 activations per rank, counted in whole-share stages
// (each of a rank's two stages is a full share of one model copy).
TEST(ClosedForm, DualPipeHoldsPPlusOneActivations) {
  const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("dualpipe", 8, 20, 2)));
  for (const RankTimeline& rank : t.ranks) EXPECT_DOUBLE_EQ(rank.peak_activation_memory, 8 + 1);
}

TEST(ClosedForm, ZbvHandcraftedHasZeroBubbleWhenFEqualsIEqualsW) {
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 3 * p}) {
      const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("zbv-handcrafted", p, m, 2)));
      EXPECT_DOUBLE_EQ(t.metrics.zb_bubble_rate, 0) << "P=" << p << " M=" << m;
    }
  }
}

// Seed 003's closed form for interleaved 1F1B with overlap cells (per chunk f, b, fb):
// (p-1)(f+b) + (p(v-1)+1)(f+b) + (mv - p(v-1) - 1) fb.
TEST(ClosedForm, InterleavedOneFOneBOverlapMakespan) {
  const int p = 4, v = 2, m = 16;
  const double f = 1, b = 2, fb = 2.75;
  PlanRequest request = MakeRequest("interleaved-1f1b-overlap", p, m, v, f, b / 2, b / 2);
  request.costs.stages[0].overlap = fb;
  const double expected =
      (p - 1) * (f + b) + (p * (v - 1) + 1) * (f + b) + (m * v - p * (v - 1) - 1) * fb;
  EXPECT_DOUBLE_EQ(SimulateOrDie(BuildOrDie(request)).metrics.makespan, expected);
}

}  // namespace
}  // namespace pipeplan
