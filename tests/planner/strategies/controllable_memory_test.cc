// V-Half and V-Min (controllable memory, docs/strategies.md "v-half / v-min"): peak
// activation memory against the paper's (P+2)//2 and (P+4)//3 microbatches, no bubble in the
// repeating phase of V-Half when W + 2I >= 2F and W + 2F >= 2I, the memory/bubble trade-off
// between the two, per-stage costs, degenerate inputs and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::SimulateOrDie;

// The paper's peaks, in microbatches of a rank's whole share of the model (both chunks).
int VHalfPeak(int ranks) { return (ranks + 2) / 2; }
int VMinPeak(int ranks) { return (ranks + 4) / 3; }

int FormulaPeak(const std::string& strategy, int ranks) {
  return strategy == "v-half" ? VHalfPeak(ranks) : VMinPeak(ranks);
}

double MaxPeak(const Timeline& timeline) {
  double peak = 0;
  for (const RankTimeline& rank : timeline.ranks) {
    peak = std::max(peak, rank.peak_activation_memory);
  }
  return peak;
}

// Idle time inside each rank's own span (first compute start to last compute end).
std::vector<double> IdleInSpan(const Timeline& timeline) {
  std::vector<double> idle;
  for (const RankTimeline& rank : timeline.ranks) {
    idle.push_back(rank.last_end - rank.first_start - rank.busy);
  }
  return idle;
}

// Per-stage costs that differ from stage to stage (deterministic, no RNG).
PlanRequest WithUnevenStages(PlanRequest request, double comm) {
  const int stages = request.topology.num_stages();
  request.costs.stages.clear();
  for (int s = 0; s < stages; ++s) {
    const double scale = 0.5 + 0.25 * ((s * 5) % 7);  // 0.5 .. 2.0
    request.costs.stages.push_back(
        StageCosts{1.0 * scale, 1.9 * scale, 1.1 * scale, 0.8 * scale, 0});
  }
  request.costs.boundaries = {BoundaryCosts{comm, 0, 0}};
  return request;
}

class ControllableMemoryTest : public ::testing::TestWithParam<std::string> {};

std::string TestName(const ::testing::TestParamInfo<std::string>& strategy) {
  std::string name = strategy.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Strategies, ControllableMemoryTest, ::testing::Values("v-half", "v-min"),
                         TestName);

// Once M reaches the formula, the peak over ranks is exactly the formula and no rank exceeds it.
TEST_P(ControllableMemoryTest, PeakEqualsTheFormulaOnceMicrobatchesSuffice) {
  for (int p = 1; p <= 16; ++p) {
    const int formula = FormulaPeak(GetParam(), p);
    for (int m : {formula, formula + 1, 2 * p, 3 * p + 1}) {
      const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest(GetParam(), p, m, 2)));
      for (const RankTimeline& rank : t.ranks) {
        EXPECT_LE(rank.peak_activation_memory, formula) << "P=" << p << " M=" << m;
      }
      EXPECT_DOUBLE_EQ(MaxPeak(t), formula) << "P=" << p << " M=" << m;
    }
  }
}

// With fewer microbatches than the formula, every microbatch may be in flight at once.
TEST_P(ControllableMemoryTest, PeakIsTheMicrobatchCountBelowTheFormula) {
  for (int p = 1; p <= 16; ++p) {
    for (int m = 1; m < FormulaPeak(GetParam(), p); ++m) {
      const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest(GetParam(), p, m, 2)));
      EXPECT_DOUBLE_EQ(MaxPeak(t), m) << "P=" << p << " M=" << m;
    }
  }
}

TEST_P(ControllableMemoryTest, NonUniformStageCostsGiveValidPlansWithinTheBound) {
  for (int p : {1, 2, 3, 4, 7, 8}) {
    for (int m : {1, std::max(1, p - 1), p, 2 * p + 1}) {
      for (double comm : {0.0, 0.3}) {
        const PlanRequest request = WithUnevenStages(MakeRequest(GetParam(), p, m, 2), comm);
        // BuildPlan validates the plan, including the deadlock dry run.
        const Timeline t = SimulateOrDie(BuildOrDie(request));
        EXPECT_LE(MaxPeak(t), FormulaPeak(GetParam(), p)) << "P=" << p << " M=" << m;
      }
    }
  }
}

TEST_P(ControllableMemoryTest, Deterministic) {
  const PlanRequest request = WithUnevenStages(MakeRequest(GetParam(), 6, 17, 2), 0.2);
  const Plan first = BuildOrDie(request);
  const Plan second = BuildOrDie(request);
  EXPECT_EQ(first, second);
  EXPECT_EQ(SimulateOrDie(first), SimulateOrDie(second));
}

TEST_P(ControllableMemoryTest, DegenerateInputsStillPlan) {
  struct Case {
    int ranks, microbatches;
    double forward, input, weight, comm;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, 0},       {1, 5, 1, 1, 1, 0},    {2, 1, 1, 1, 1, 0},
      {16, 1, 1, 1, 1, 0},      {16, 3, 1, 1, 1, 0.5}, {5, 9, 0, 0, 0, 0},
      {4, 8, 1, 0, 0, 0},       {4, 8, 0, 1, 0, 2},    {8, 16, 1e15, 1e15, 1e15, 1e15},
      {3, 7, 1e-9, 5, 1e-9, 0},
  };
  for (const Case& c : cases) {
    const PlanRequest request =
        MakeRequest(GetParam(), c.ranks, c.microbatches, 2, c.forward, c.input, c.weight, c.comm);
    const StatusOr<Plan> plan = BuildPlan(request);
    ASSERT_TRUE(plan.ok()) << "P=" << c.ranks << " M=" << c.microbatches << ": "
                           << plan.status().message();
    EXPECT_LE(MaxPeak(SimulateOrDie(*plan)), FormulaPeak(GetParam(), c.ranks))
        << "P=" << c.ranks << " M=" << c.microbatches;
  }
}

// Freeing part of the activation at I can only lower the peak; the limit check sees it.
TEST_P(ControllableMemoryTest, MemoryModelAndLimit) {
  const int p = 8;
  const int formula = FormulaPeak(GetParam(), p);
  PlanRequest request = MakeRequest(GetParam(), p, 24, 2);
  request.memory.stages = {StageMemory{0.0, 0.2}};
  EXPECT_LE(MaxPeak(SimulateOrDie(BuildOrDie(request))), formula);

  request = MakeRequest(GetParam(), p, 24, 2);
  request.memory.limit = formula;
  EXPECT_TRUE(BuildPlan(request).ok());
  request.memory.limit = formula - 0.5;
  const StatusOr<Plan> over = BuildPlan(request);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("above the memory limit"), std::string::npos)
      << over.status().message();
}

TEST_P(ControllableMemoryTest, RejectsAnotherStagesPerRank) {
  const StatusOr<Plan> plan = BuildPlan(MakeRequest(GetParam(), 4, 8, 3));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("topology.stages_per_rank"), std::string::npos)
      << plan.status().message();
}

// V-Half's building block repeats without a bubble iff W + 2I >= 2F and W + 2F >= 2I: more
// microbatches then add no idle time (exactly none with unit costs; with other costs the
// warm-up and cool-down may shift by a pass or two as the kept reordering changes).
TEST(VHalf, RepeatingPhaseHasNoBubbleWhenTheCostConditionHolds) {
  struct Costs {
    double forward, input, weight;
  };
  for (const Costs& c :
       {Costs{1, 1, 1}, Costs{1.2, 1, 1}, Costs{1, 1.4, 0.8}, Costs{1, 0.8, 0.5}}) {
    ASSERT_GE(c.weight + 2 * c.input, 2 * c.forward);
    ASSERT_GE(c.weight + 2 * c.forward, 2 * c.input);
    const bool unit = c.forward == 1 && c.input == 1 && c.weight == 1;
    const double allowance = unit ? 1e-9 : 2 * std::max({c.forward, c.input, c.weight});
    for (int p : {2, 3, 4, 5, 8, 9}) {
      const auto idle_with = [&](int m) {
        return IdleInSpan(SimulateOrDie(
            BuildOrDie(MakeRequest("v-half", p, m, 2, c.forward, c.input, c.weight))));
      };
      const std::vector<double> shorter = idle_with(2 * p);
      const std::vector<double> longer = idle_with(8 * p);
      for (int r = 0; r < p; ++r) {
        EXPECT_LE(longer[r], shorter[r] + allowance)
            << "rank " << r << " P=" << p << " F=" << c.forward << " I=" << c.input
            << " W=" << c.weight;
      }
    }
  }
}

TEST(VHalf, RepeatingPhaseHasABubbleWhenForwardsDominate) {
  // W + 2I = 3 < 2F = 6: every repetition adds idle time.
  const int p = 4;
  const auto idle_with = [&](int m) {
    const std::vector<double> idle =
        IdleInSpan(SimulateOrDie(BuildOrDie(MakeRequest("v-half", p, m, 2, 3, 1, 1))));
    return *std::max_element(idle.begin(), idle.end());
  };
  EXPECT_GT(idle_with(8 * p), idle_with(2 * p) + 6 * p);
}

// With unit costs and two ranks the memory of V-Half is enough to hide warm-up and cool-down.
TEST(VHalf, TwoRanksWithUnitCostsHaveNoBubble) {
  for (int m : {4, 8, 13}) {
    const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("v-half", 2, m, 2)));
    EXPECT_DOUBLE_EQ(t.metrics.zb_bubble_rate, 0) << "M=" << m;
    EXPECT_DOUBLE_EQ(t.metrics.makespan, 6 * m + 1) << "M=" << m;  // rank 1 starts one F late
  }
}

// From three ranks on, no schedule within V-Half's memory is free of bubbles, whatever the order:
// rank 0's first I needs microbatch 0 down and back up the V (2P unit F's), and until then the
// rank can only run F's, at most 2 * ((P+2)//2) of them (two chunks per microbatch). So rank 0
// idles at least 2P - 2 * ((P+2)//2) inside its span: P-2 for even P, P-1 for odd P.
TEST(VHalf, WarmUpBubbleIsAtLeastTheMemoryBound) {
  for (int p = 3; p <= 16; ++p) {
    const std::vector<double> idle =
        IdleInSpan(SimulateOrDie(BuildOrDie(MakeRequest("v-half", p, 4 * p, 2))));
    EXPECT_GE(idle[0], 2 * p - 2 * VHalfPeak(p)) << "P=" << p;
  }
}

// Unit costs: a step is 6M of work per rank plus the idle of warm-up and cool-down, and the
// steady phase adds none (W + 2I >= 2F and W + 2F >= 2I, the paper's condition), so that idle
// is the same for every M from 2P on. It is at least the warm-up's memory bound (rank 0 waits
// 2P for its first I and runs at most twice its peak of F's before it). Its value is derived
// by the solver at P = 3 and 4: OptimalTest.ControllableMemoryIsOptimalAtUnitCosts proves no
// order of the V placement within each schedule's peak is shorter.
TEST(ControllableMemory, UnitCostStepIsSixMPlusAnIdleThatDoesNotGrowWithM) {
  for (const char* strategy : {"v-half", "v-min"}) {
    for (int p : {4, 6, 8, 16}) {
      const auto idle_with = [&](int m) {
        const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest(strategy, p, m, 2)));
        return t.metrics.makespan - 6 * m;
      };
      const double idle = idle_with(2 * p);
      EXPECT_GE(idle, 2 * p - 2 * FormulaPeak(strategy, p)) << strategy << " P=" << p;
      for (int m : {3 * p, 4 * p, 8 * p}) {
        EXPECT_DOUBLE_EQ(idle_with(m), idle) << strategy << " P=" << p << " M=" << m;
      }
    }
  }
}

// V-Min holds a third of 1F1B's activations instead of a half, and pays with more bubble.
TEST(ControllableMemory, VMinTradesBubbleForMemory) {
  for (int p : {4, 6, 8, 12, 16}) {
    const int m = 3 * p;
    const Timeline half = SimulateOrDie(BuildOrDie(MakeRequest("v-half", p, m, 2)));
    const Timeline min = SimulateOrDie(BuildOrDie(MakeRequest("v-min", p, m, 2)));
    EXPECT_LT(MaxPeak(min), MaxPeak(half)) << "P=" << p;
    EXPECT_GT(min.metrics.zb_bubble_rate, half.metrics.zb_bubble_rate) << "P=" << p;
    EXPECT_GT(min.metrics.makespan, half.metrics.makespan) << "P=" << p;
  }
}

// The reordering reads each stage's own costs: the plan built for uneven stage costs differs
// from the one built for uniform costs and runs faster under the uneven costs.
TEST(ControllableMemory, UsesPerStageCosts) {
  for (const char* strategy : {"v-half", "v-min"}) {
    for (int p : {4, 8}) {
      const PlanRequest uniform = MakeRequest(strategy, p, 3 * p, 2, 1, 1.1, 0.8, 0.1);
      const PlanRequest uneven = WithUnevenStages(uniform, 0.1);
      const Plan tuned = BuildOrDie(uneven);
      const Plan generic = BuildOrDie(uniform);
      EXPECT_NE(tuned.programs, generic.programs) << strategy << " P=" << p;
      const StatusOr<Timeline> generic_on_uneven = Simulate(generic, uneven.costs, uneven.memory);
      ASSERT_TRUE(generic_on_uneven.ok()) << generic_on_uneven.status().message();
      EXPECT_LT(SimulateOrDie(tuned).metrics.makespan, generic_on_uneven->metrics.makespan)
          << strategy << " P=" << p;
    }
  }
}

}  // namespace
}  // namespace pipeplan
