// `auto`: the plan it returns is at least as fast as every strategy it could have picked, fits
// the memory limit, and an impossible limit names the smallest one that would fit.
#include "pipeplan/planner/auto_search.h"

#include <gtest/gtest.h>

#include "pipeplan/planner/make_plan.h"
#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

// The Zero Bubble paper's 1.5B-model costs (one rank's share), P=8, M=24.
PlanRequest PaperRequest(const std::string& strategy) {
  return MakeRequest(strategy, 8, 24, 0, 18522, 18086, 9337, 601);
}

TEST(AutoSearch, IsNoSlowerThanAnySingleStrategyAtOneStagePerRank) {
  const StatusOr<AutoResult> result = AutoSearch(PaperRequest("auto"));
  ASSERT_TRUE(result.ok()) << result.status().message();
  const double best = testing::SimulateOrDie(result->best.plan).metrics.makespan;
  for (const Strategy& strategy : AllStrategies()) {
    if (strategy.min_stages_per_rank > 1 || strategy.name == "zb") continue;
    const StatusOr<Plan> plan = BuildPlan(PaperRequest(std::string(strategy.name)));
    if (!plan.ok()) continue;
    EXPECT_LE(best, testing::SimulateOrDie(*plan).metrics.makespan) << strategy.name;
  }
  EXPECT_EQ(result->best.plan.provenance.strategy, "auto -> " + result->best.plan.request.strategy);
  // Runners-up are listed fastest first.
  for (size_t i = 1; i < result->candidates.size(); ++i) {
    const AutoCandidate& a = result->candidates[i - 1];
    const AutoCandidate& b = result->candidates[i];
    if (a.status.ok() && b.status.ok()) {
      EXPECT_LE(a.makespan, b.makespan);
    }
    if (!a.status.ok()) {
      EXPECT_FALSE(b.status.ok());
    }
  }
}

TEST(AutoSearch, RespectsTheMemoryLimitAndBeatsZb1pUnderIt) {
  PlanRequest request = PaperRequest("auto");
  request.memory.limit = 8;  // 1F1B's peak: P microbatch activations
  const StatusOr<AutoResult> result = AutoSearch(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const Timeline timeline = testing::SimulateOrDie(result->best.plan);
  EXPECT_LE(PeakMemory(timeline), 8 + 1e-9);
  const Timeline zb1p = testing::SimulateOrDie(testing::BuildOrDie(PaperRequest("zb-1p")));
  EXPECT_LE(timeline.metrics.makespan, zb1p.metrics.makespan);
}

TEST(AutoSearch, AnImpossibleLimitNamesTheSmallestOneThatFits) {
  PlanRequest request = PaperRequest("auto");
  request.memory.limit = 0.5;
  const StatusOr<AutoResult> plan = AutoSearch(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  // The greedy zb plans under any limit that holds one microbatch's activation per rank (1);
  // of the fixed schedules, v-min would need the least, (P+4)//3 = 4.
  EXPECT_EQ(plan.status().message(),
            "auto: no strategy fits memory limit 0.5; the smallest limit that fits is 1, needed by "
            "zb (V=1)");
}

TEST(AutoSearch, PostValidationKeepsToTheZeroBubbleFamily) {
  PlanRequest request = PaperRequest("auto");
  request.options.post_validation = true;
  const StatusOr<AutoResult> result = AutoSearch(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  for (const AutoCandidate& candidate : result->candidates) {
    EXPECT_TRUE(candidate.request.options.post_validation);
    EXPECT_NE(candidate.request.strategy, "1f1b");
  }
}

// A calibrated cost file carries its memory model: auto takes it in before splitting the share
// over each candidate's stages, as if it had been given as the request's memory (it once
// reached the V = 2 candidates unsplit).
TEST(AutoSearch, TakesTheCostFilesMemoryBeforeSplittingTheShare) {
  MemoryModel memory;
  memory.stages = {StageMemory{.activation = 2}};
  memory.static_per_rank = 3;
  PlanRequest in_costs = MakeRequest("auto", 4, 8);
  in_costs.memory.limit = 12;
  in_costs.costs.memory = memory;
  PlanRequest as_memory = MakeRequest("auto", 4, 8);
  as_memory.memory = memory;
  as_memory.memory.limit = 12;
  const StatusOr<AutoResult> a = AutoSearch(in_costs);
  const StatusOr<AutoResult> b = AutoSearch(as_memory);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
  ASSERT_EQ(a->candidates.size(), b->candidates.size());
  for (size_t i = 0; i < a->candidates.size(); ++i) {
    EXPECT_EQ(a->candidates[i].request.strategy, b->candidates[i].request.strategy) << i;
    EXPECT_EQ(a->candidates[i].status.message(), b->candidates[i].status.message()) << i;
    EXPECT_EQ(a->candidates[i].makespan, b->candidates[i].makespan) << i;
    EXPECT_EQ(a->candidates[i].peak_memory, b->candidates[i].peak_memory) << i;
  }
  EXPECT_EQ(a->best.plan.programs, b->best.plan.programs);
}

// compare's rows and auto's candidates: a rank's share split over V stages under loop and V
// placement, kept whole under dual placement (each copy holds a whole share), per-stage
// figures left as given.
TEST(ShareAtStages, SplitsTheShareByChunksAndLeavesPerStageFiguresAlone) {
  PlanRequest share = MakeRequest("auto", 4, 8, 1, 2, 4, 6, 0.5);
  share.figures = FigureScope::kRankShare;
  const PlanRequest loop = ShareAtStages(share, "interleaved-1f1b", Placement::kLoop, 2);
  EXPECT_EQ(loop.figures, FigureScope::kStage);
  EXPECT_EQ(loop.strategy, "interleaved-1f1b");
  EXPECT_EQ(loop.topology.stages_per_rank, 2);
  EXPECT_EQ(loop.topology.placement, Placement::kLoop);
  ASSERT_EQ(loop.costs.stages.size(), 1u);
  EXPECT_EQ(loop.costs.stages[0].forward, 1);
  EXPECT_EQ(loop.costs.stages[0].backward_weight, 3);
  EXPECT_EQ(loop.costs.boundaries, share.costs.boundaries);  // a transfer is a transfer
  const PlanRequest dual = ShareAtStages(share, "dualpipe", Placement::kDual, 2);
  EXPECT_EQ(dual.costs.stages, share.costs.stages);
  EXPECT_EQ(dual.topology.placement, Placement::kDual);

  PlanRequest per_stage = share;
  per_stage.costs.stages = {StageCosts{.forward = 1, .backward = 2},
                            StageCosts{.forward = 3, .backward = 4}};
  const PlanRequest kept = ShareAtStages(per_stage, "zbv", Placement::kVShape, 2);
  EXPECT_EQ(kept.costs.stages, per_stage.costs.stages);
  EXPECT_EQ(kept.memory, per_stage.memory);

  // A request whose uniform figures are one stage's is not split again.
  share.figures = FigureScope::kStage;
  const PlanRequest stage = ShareAtStages(share, "interleaved-1f1b", Placement::kLoop, 2);
  EXPECT_EQ(stage.costs.stages, share.costs.stages);
}

// auto's candidates are the same whether the request says its figures are one rank's share or
// one stage at V = 2 of half of them.
TEST(AutoSearch, AStagesFiguresAtItsVAndARanksShareGiveTheSamePick) {
  PlanRequest share = MakeRequest("auto", 4, 8, 1, 2, 4, 6, 0.5);
  share.figures = FigureScope::kRankShare;
  share.memory.limit = 6;
  PlanRequest stage = MakeRequest("auto", 4, 8, 2, 1, 2, 3, 0.5);
  stage.memory.limit = 6;
  const StatusOr<AutoResult> a = AutoSearch(share);
  const StatusOr<AutoResult> b = AutoSearch(stage);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->candidates.size(), b->candidates.size());
  for (size_t i = 0; i < a->candidates.size(); ++i) {
    EXPECT_EQ(a->candidates[i].request, b->candidates[i].request) << i;
    EXPECT_EQ(a->candidates[i].makespan, b->candidates[i].makespan) << i;
  }
  EXPECT_EQ(a->best.plan, b->best.plan);
}

TEST(AutoSearch, IsDeterministic) {
  const StatusOr<Evaluated> a = MakePlan(PaperRequest("auto"), PlanOptions{});
  const StatusOr<Evaluated> b = MakePlan(PaperRequest("auto"), PlanOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->plan, b->plan);
  EXPECT_EQ(a->notes, b->notes);
}

}  // namespace
}  // namespace pipeplan
