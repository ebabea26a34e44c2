// What a runtime runs and what a cost model measured shape the advice: --runtime leaves out
// what the runtime cannot run, and auto does not pick a plan whose advantage rests on an
// assumed figure.
#include <gtest/gtest.h>

#include <string>

#include "pipeplan/model/figure_sources.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/runtime_support.h"
#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

TEST(RuntimeSupport, EachRuntimeRunsWhatItCan) {
  EXPECT_TRUE(CheckRunsOn(Runtime::kAny, "dualpipe", Placement::kDual, false).ok());
  EXPECT_EQ(
      CheckRunsOn(Runtime::kTorch, "dualpipe", Placement::kDual, false).message().substr(0, 35),
      "runtime torch cannot run dualpipe: ");
  EXPECT_TRUE(CheckRunsOn(Runtime::kPipeplanTorch, "dualpipe", Placement::kDual, true).ok());
  EXPECT_TRUE(CheckRunsOn(Runtime::kPipeplanTorch, "zbv", Placement::kVShape, true).ok());
  EXPECT_TRUE(CheckRunsOn(Runtime::kTorch, "zbv", Placement::kVShape, false).ok());
  EXPECT_FALSE(CheckRunsOn(Runtime::kTorch, "zbv", Placement::kVShape, true).ok());
  EXPECT_TRUE(CheckRunsOn(Runtime::kTorchtitan, "dualpipe-v", Placement::kVShape, false).ok());
  EXPECT_TRUE(CheckRunsOn(Runtime::kMegatron, "interleaved-1f1b", Placement::kLoop, false).ok());
  EXPECT_FALSE(CheckRunsOn(Runtime::kMegatron, "zb-h1", Placement::kLoop, false).ok());
  EXPECT_TRUE(RunsCellsInTurn(Runtime::kTorch));
  EXPECT_FALSE(RunsCellsInTurn(Runtime::kMegatron));
  for (const Runtime runtime : {Runtime::kAny, Runtime::kPipeplanTorch, Runtime::kTorch,
                                Runtime::kTorchtitan, Runtime::kMegatron}) {
    EXPECT_EQ(RuntimeFromName(RuntimeName(runtime)), runtime);
  }
  EXPECT_EQ(RuntimeFromName("deepspeed"), std::nullopt);
}

TEST(RuntimeSupport, AutoAmongWhatTorchRunsNeverPicksDualPlacementOrPostValidation) {
  // Default costs at P = 2: without a runtime auto picks dualpipe (two model copies).
  PlanRequest request = MakeRequest("auto", 2, 8, 0, 1, 1, 1, 0);
  const StatusOr<AutoResult> any = AutoSearch(request);
  ASSERT_TRUE(any.ok()) << any.status().message();
  request.runtime = Runtime::kTorch;
  const StatusOr<AutoResult> torch = AutoSearch(request);
  ASSERT_TRUE(torch.ok()) << torch.status().message();
  for (const AutoCandidate& candidate : torch->candidates) {
    EXPECT_NE(candidate.request.topology.placement, Placement::kDual) << candidate.request.strategy;
  }
  EXPECT_NE(torch->best.plan.request.topology.placement, Placement::kDual);
  EXPECT_LT(torch->candidates.size(), any->candidates.size());
  // A strategy named outright is refused with the reason.
  PlanRequest dual = MakeRequest("dualpipe", 2, 8, 2, 1, 1, 1, 0);
  dual.runtime = Runtime::kTorch;
  EXPECT_NE(BuildPlan(dual).status().message().find("runtime torch cannot run dualpipe"),
            std::string::npos);
  request.options.post_validation = true;
  EXPECT_FALSE(AutoSearch(request).ok());  // torch runs no post-validation
}

TEST(RuntimeSupport, TorchRunsAnOverlapCellsHalvesInTurn) {
  PlanRequest request = MakeRequest("1f1b-overlap", 4, 8, 1, 1, 1, 1, 0);
  request.costs.stages[0].overlap = 1.5;  // below F + B = 3
  const StatusOr<Evaluated> overlapped = BuildAndSimulatePlan(request);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status().message();
  request.runtime = Runtime::kTorch;
  const StatusOr<Evaluated> in_turn = BuildAndSimulatePlan(request);
  ASSERT_TRUE(in_turn.ok()) << in_turn.status().message();
  EXPECT_GT(in_turn->timeline.metrics.makespan, overlapped->timeline.metrics.makespan);
  EXPECT_EQ(in_turn->plan.request.costs.stages[0].overlap, 0);  // F + B
}

// Per-stage costs of a 1F1B run: B measured, I and W assumed (B / 2 each).
CostModel AssumedSplit() {
  CostModel costs;
  const StageCosts stage_costs{
      .forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1, .overlap = 0};
  costs.stages = {stage_costs, stage_costs};
  const StageSources stage{.forward = {FigureOrigin::kMeasured, 0},
                           .backward = {FigureOrigin::kMeasured, 0},
                           .backward_input = {FigureOrigin::kAssumed, 0},
                           .backward_weight = {FigureOrigin::kAssumed, 0},
                           .overlap = {FigureOrigin::kAssumed, 0}};
  costs.sources = {stage, stage};
  costs.runs = {"1f1b P=2 V=1 M=8"};
  return costs;
}

TEST(AssumedFigures, AutoDoesNotPickAPlanWhoseAdvantageRestsOnAnAssumedSplit) {
  PlanRequest request = MakeRequest("auto", 2, 8, 1, 1, 1, 1, 0);
  request.costs = AssumedSplit();
  request.runtime = Runtime::kTorch;
  const StatusOr<AutoResult> result = AutoSearch(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  // A zero-bubble plan simulates fastest, but only as I + W = B; the pick reads no I or W.
  EXPECT_NE(result->candidates.front().assumes.find("I + W = B"), std::string::npos)
      << result->candidates.front().request.strategy;
  const AutoCandidate& pick = result->candidates[result->pick];
  EXPECT_TRUE(pick.assumes.empty()) << pick.request.strategy << ": " << pick.assumes;
  EXPECT_FALSE(KindsRead(result->best.plan).split);
  ASSERT_EQ(result->notes.size(), 1u);
  EXPECT_NE(result->notes[0].find("only if"), std::string::npos) << result->notes[0];
  EXPECT_NE(result->notes[0].find("profile a zero-bubble plan"), std::string::npos)
      << result->notes[0];

  // Measured, a split that costs 1.8 B ranks zero bubble behind 1F1B; nothing is assumed.
  for (StageSources& stage : request.costs.sources) {
    stage.backward_input = stage.backward_weight = {FigureOrigin::kMeasured, 0};
  }
  for (StageCosts& stage : request.costs.stages) {
    stage.backward_input = stage.backward_weight = 1.8;
  }
  const StatusOr<AutoResult> measured = AutoSearch(request);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  EXPECT_TRUE(measured->candidates[measured->pick].assumes.empty());
  EXPECT_FALSE(KindsRead(measured->best.plan).split) << measured->best.plan.request.strategy;
  for (const std::string& note : measured->notes) {
    EXPECT_EQ(note.find("I + W = B"), std::string::npos) << note;
  }
  // Candidates at another V read figures cut by depth from the 2 measured stages: an estimate.
  for (const AutoCandidate& candidate : measured->candidates) {
    const bool cut = candidate.request.topology.stages_per_rank > 1;
    EXPECT_EQ(candidate.assumes.find("figures cut by depth from 2 stages") == 0, cut)
        << candidate.request.strategy << ": " << candidate.assumes;
  }
}

TEST(AssumedFigures, GivenFiguresAssumeNothing) {
  // Flags and hand-written files state their figures: auto picks the fastest as before.
  const StatusOr<AutoResult> result = AutoSearch(MakeRequest("auto", 4, 8, 1, 1, 1, 1, 0));
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->pick, 0u);
  EXPECT_TRUE(result->notes.empty());
  for (const AutoCandidate& candidate : result->candidates) EXPECT_TRUE(candidate.assumes.empty());
}

}  // namespace
}  // namespace pipeplan
