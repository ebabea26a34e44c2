// Normalize: one normalisation of a request (V and placement, memory taken from a cost file,
// figures fitted by depth, F&B cells as the runtime runs them), whose notes reach the plan.
#include "pipeplan/planner/normalize.h"

#include <gtest/gtest.h>

#include <string>

#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/planner.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

// Four stages of different cost, as a calibrated file of a P = 4, V = 1 run gives them.
PlanRequest WithFourStages(const std::string& strategy, int ranks) {
  PlanRequest request = MakeRequest(strategy, ranks, 8, 0);
  request.costs.stages.clear();
  for (const double forward : {1.0, 2.0, 3.0, 4.0}) {
    request.costs.stages.push_back({forward, 2 * forward, forward, forward, 0.0});
  }
  return request;
}

TEST(Normalize, ResolvesTheStrategysVAndPlacement) {
  const StatusOr<NormalizedRequest> zbv = Normalize(MakeRequest("zbv", 4, 8, 0));
  ASSERT_TRUE(zbv.ok()) << zbv.status().message();
  EXPECT_EQ(zbv->request.topology.stages_per_rank, 2);
  EXPECT_EQ(zbv->request.topology.placement, Placement::kVShape);
  EXPECT_FALSE(zbv->figures_cut);
  EXPECT_TRUE(zbv->notes.empty());
}

TEST(Normalize, FiguresOfAnotherCutAreCutByDepthAndSaySo) {
  const StatusOr<NormalizedRequest> same = Normalize(WithFourStages("1f1b", 4));
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_FALSE(same->figures_cut);
  EXPECT_TRUE(same->notes.empty());

  const StatusOr<NormalizedRequest> cut = Normalize(WithFourStages("zbv", 4));
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_TRUE(cut->figures_cut);
  EXPECT_EQ(cut->request.costs.stages.size(), 8u);
  ASSERT_EQ(cut->notes.size(), 1u);
  EXPECT_EQ(cut->notes[0],
            "the 4 per-stage entries of the costs were cut by depth into the 8 stages of zbv at "
            "V=2 (an estimate: profile a plan with that V to measure them)");
}

// Uniform figures say what they describe: one stage (plan's flags, the default) or one rank's
// share (compare's rows, auto's candidates, a request file that says so), split over the
// stages a rank holds: V of them under loop placement, one under dual (each copy holds a whole
// share). Either way the plan is the one of the stage's figures.
TEST(Normalize, SplitsARanksShareOverTheStagesARankHolds) {
  for (const auto& [strategy, chunks] : {std::pair{"interleaved-1f1b", 2}, {"dualpipe", 1}}) {
    SCOPED_TRACE(strategy);
    PlanRequest share = MakeRequest(strategy, 4, 8, 2, 4, 6, 2, 0.5);
    share.memory.stages = {StageMemory{.activation = 1, .freed_by_input = 0.5}};
    share.figures = FigureScope::kRankShare;
    const StatusOr<NormalizedRequest> split = Normalize(share);
    ASSERT_TRUE(split.ok()) << split.status().message();
    EXPECT_EQ(split->request.figures, FigureScope::kStage);
    EXPECT_EQ(split->request.costs.stages[0].forward, 4.0 / chunks);
    EXPECT_EQ(split->request.costs.stages[0].backward_weight, 2.0 / chunks);
    EXPECT_EQ(split->request.costs.boundaries, share.costs.boundaries);
    EXPECT_EQ(split->request.memory.stages[0].activation, 1.0 / chunks);

    PlanRequest stage =
        MakeRequest(strategy, 4, 8, 2, 4.0 / chunks, 6.0 / chunks, 2.0 / chunks, 0.5);
    stage.memory.stages = {StageMemory{.activation = 1.0 / chunks, .freed_by_input = 0.5 / chunks}};
    const StatusOr<Plan> from_share = BuildPlan(share);
    const StatusOr<Plan> from_stage = BuildPlan(stage);
    ASSERT_TRUE(from_share.ok()) << from_share.status().message();
    ASSERT_TRUE(from_stage.ok()) << from_stage.status().message();
    EXPECT_EQ(*from_share, *from_stage);
  }
}

// MakeRankShare, for searches over V, is SplitRankShare's inverse at V stages of a rank.
TEST(Normalize, MakeRankShareUndoesTheSplit) {
  const PlanRequest stage = MakeRequest("interleaved-1f1b", 4, 8, 2, 1, 2, 3, 0.5);
  PlanRequest share = MakeRankShare(stage);
  EXPECT_EQ(share.figures, FigureScope::kRankShare);
  EXPECT_EQ(share.costs.stages[0].forward, 2);
  SplitRankShare(share);
  EXPECT_EQ(share.figures, FigureScope::kStage);
  EXPECT_EQ(share.costs, stage.costs);
}

TEST(Normalize, TakesACostFilesMemoryKeepingTheRequestsLimit) {
  PlanRequest request = MakeRequest("1f1b", 2, 4);
  MemoryModel file_memory;
  file_memory.unit = MemoryUnit::kBytes;
  file_memory.static_per_rank = 1000;
  file_memory.limit = 5000;
  request.costs.memory = file_memory;
  const StatusOr<NormalizedRequest> own_limit = Normalize(request);
  ASSERT_TRUE(own_limit.ok()) << own_limit.status().message();
  EXPECT_FALSE(own_limit->request.costs.memory.has_value());
  EXPECT_EQ(own_limit->request.memory.unit, MemoryUnit::kBytes);
  EXPECT_EQ(own_limit->request.memory.limit, 5000);  // the file's, the request had none
  request.memory.limit = 7000;
  const StatusOr<NormalizedRequest> asked = Normalize(request);
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  EXPECT_EQ(asked->request.memory.limit, 7000);
  EXPECT_EQ(asked->request.memory.static_per_rank, 1000);
}

TEST(Normalize, TorchsRuntimeRunsFAndBCellsInTurn) {
  PlanRequest request = MakeRequest("1f1b-overlap", 2, 4);
  request.costs.stages[0].overlap = 2.5;
  request.runtime = Runtime::kTorch;
  const StatusOr<NormalizedRequest> normalized = Normalize(request);
  ASSERT_TRUE(normalized.ok()) << normalized.status().message();
  EXPECT_EQ(normalized->request.costs.stages[0].overlap, 0.0);
}

TEST(Normalize, ItsNotesReachThePlanAndAutosPick) {
  const StatusOr<Evaluated> planned = BuildAndSimulatePlan(WithFourStages("zbv", 4));
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  ASSERT_EQ(planned->notes.size(), 1u);
  EXPECT_NE(planned->notes[0].find("cut by depth into the 8 stages of zbv"), std::string::npos);

  // auto at P = 2: every candidate has another number of stages than the four given.
  const StatusOr<AutoResult> result = AutoSearch(WithFourStages("auto", 2));
  ASSERT_TRUE(result.ok()) << result.status().message();
  const PlanRequest& pick = result->best.plan.request;
  ASSERT_FALSE(result->best.notes.empty()) << pick.strategy;
  EXPECT_NE(result->best.notes[0].find("stages of " + pick.strategy +
                                       " at V=" + std::to_string(pick.topology.stages_per_rank)),
            std::string::npos)
      << result->best.notes[0];
  EXPECT_EQ(result->best.notes, result->candidates[result->pick].notes);
}

TEST(Normalize, StaticMemoryOfOtherRanksIsTakenAsTheLargestAndSaysSo) {
  PlanRequest request = WithFourStages("1f1b", 8);
  request.memory.static_by_rank = {10, 40, 30, 20};
  const StatusOr<NormalizedRequest> normalized = Normalize(request);
  ASSERT_TRUE(normalized.ok()) << normalized.status().message();
  EXPECT_EQ(normalized->request.memory.static_per_rank, 40);
  ASSERT_EQ(normalized->notes.size(), 2u);
  EXPECT_EQ(normalized->notes[1],
            "the static memory measured on 4 ranks counts its largest, 40, for each of the 8 "
            "ranks of 1f1b: an upper bound (profile at that P to measure each)");
}

}  // namespace
}  // namespace pipeplan
