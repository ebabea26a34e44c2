// Profiles of different plans of one model calibrated together: which run measured each
// figure, which were assumed, and the refusals of profiles that do not go together.
#include "pipeplan/measurement/merge_profiles.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/model/figure_sources.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::Constant;

// Two stages; `split`: I and W measured (a zero-bubble run), else B (a 1F1B run).
Profile RunOf(bool split, const std::string& plan) {
  Profile profile;
  profile.source = "test";
  profile.plan = plan;
  profile.steps = 1;
  for (int s = 0; s < 2; ++s) {
    StageProfile stage;
    stage.forward = Constant(0.001);
    if (split) {
      stage.backward_input = Constant(0.0018);
      stage.backward_weight = Constant(0.0018);
    } else {
      stage.backward = Constant(0.002);
    }
    profile.stages.push_back(stage);
  }
  BoundaryProfile boundary;
  boundary.transfer = Constant(20e-6, 8);
  profile.boundaries = {boundary};
  return profile;
}

constexpr CalibrateOptions kUs = {.unit = TimeUnit::kMicroseconds};

TEST(FigureSourcesTest, AOneFOneBRunAloneAssumesTheSplit) {
  const StatusOr<CostModel> costs = Calibrate(RunOf(false, "1f1b P=2 V=1 M=8"), kUs);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_EQ(costs->sources.size(), 2u);
  EXPECT_EQ(costs->runs, std::vector<std::string>{"1f1b P=2 V=1 M=8, test"});
  const StageSources& stage = costs->sources[1];
  EXPECT_EQ(stage.forward, (FigureSource{FigureOrigin::kMeasured, 0}));
  EXPECT_EQ(stage.backward, (FigureSource{FigureOrigin::kMeasured, 0}));
  EXPECT_EQ(stage.backward_input.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(stage.backward_weight.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(stage.overlap.origin, FigureOrigin::kAssumed);
  const FigureKinds assumed = AssumedKinds(*costs);
  EXPECT_TRUE(assumed.split);
  EXPECT_FALSE(assumed.backward);
  EXPECT_EQ(DescribeAssumption(Common(assumed, {.split = true})), "I + W = B");
}

TEST(FigureSourcesTest, AZeroBubbleRunAloneAssumesB) {
  const StatusOr<CostModel> costs = Calibrate(RunOf(true, "zb-h1 P=2 V=1 M=8"), kUs);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 3600);  // B = I + W, assumed
  EXPECT_EQ(costs->sources[0].backward.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(costs->sources[0].backward_input.origin, FigureOrigin::kMeasured);
  EXPECT_TRUE(AssumedKinds(*costs).backward);
  EXPECT_FALSE(AssumedKinds(*costs).split);
}

TEST(FigureSourcesTest, TwoRunsTogetherMeasureBAndTheSplit) {
  const std::vector<Profile> runs = {RunOf(false, "1f1b P=2 V=1 M=8"),
                                     RunOf(true, "zb-h1 P=2 V=1 M=8")};
  const StatusOr<CostModel> costs = Calibrate(runs, kUs);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 2000);        // the 1F1B run's B
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_input, 1800);  // the zero-bubble run's I
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_weight, 1800);
  EXPECT_EQ(costs->runs.size(), 2u);
  EXPECT_EQ(costs->sources[0].backward, (FigureSource{FigureOrigin::kMeasured, 0}));
  EXPECT_EQ(costs->sources[0].backward_input, (FigureSource{FigureOrigin::kMeasured, 1}));
  const FigureKinds assumed = AssumedKinds(*costs);
  EXPECT_FALSE(assumed.split);
  EXPECT_FALSE(assumed.backward);
  // The sources travel with the file, and a bad run index is named.
  const StatusOr<std::string> text = SerializeCostModel(*costs, ProtoFormat::kText);
  ASSERT_TRUE(text.ok());
  const StatusOr<CostModel> read = ParseCostModel(*text, ProtoFormat::kText);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, *costs);
  CostModel bad = *costs;
  bad.sources[1].backward_weight.run = 5;
  EXPECT_EQ(ValidateSources(bad).message(),
            "costs.sources[1].backward_weight.run is 5, but costs.runs has 2 entries");
  bad.sources.pop_back();
  EXPECT_EQ(ValidateSources(bad).message(),
            "costs.sources has 1 entries, but costs.stages has 2 (one per stage entry, or none)");
}

TEST(FigureSourcesTest, TheFigureWithMoreSamplesWins) {
  Profile few = RunOf(false, "a");
  Profile many = RunOf(false, "b");
  many.stages[0].forward = Constant(0.005, 9);
  const StatusOr<MergedProfile> merged = MergeProfiles({few, many});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->profile.stages[0].forward.median, 0.005);
  EXPECT_EQ(merged->origins[0].forward, 1);
  EXPECT_EQ(merged->origins[1].forward, 0);  // a tie: the first
  EXPECT_EQ(merged->profile.plan, "a; b");
  EXPECT_EQ(merged->profile.steps, 2);
}

TEST(FigureSourcesTest, ProfilesOfAnotherCutOrPlacementAreRefused) {
  Profile deeper = RunOf(false, "interleaved-1f1b");
  deeper.stages.push_back(deeper.stages.front());
  deeper.boundaries.push_back(deeper.boundaries.front());
  const StatusOr<MergedProfile> cut = MergeProfiles({RunOf(false, "1f1b"), deeper});
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().message().substr(0, 50),
            "profiles[1] has 3 stages, profiles[0] has 2: profi");
  Profile v_shape = RunOf(true, "zbv");
  v_shape.boundaries[0].same_rank = true;
  const StatusOr<MergedProfile> placed = MergeProfiles({RunOf(false, "1f1b"), v_shape});
  ASSERT_FALSE(placed.ok());
  EXPECT_NE(placed.status().message().find("profiles[1] places stages 0 and 1 on one rank"),
            std::string::npos)
      << placed.status().message();
  Profile broken = RunOf(false, "x");
  broken.stages[1].forward.p90 = -1;
  EXPECT_EQ(MergeProfiles({RunOf(false, "1f1b"), broken}).status().message().substr(0, 12),
            "profiles[1]:");
  EXPECT_EQ(MergeProfiles({}).status().message(), "no profile to calibrate");
}

TEST(FigureSourcesTest, CutSourcesAreAsMeasuredAsTheirLeastMeasuredStage) {
  std::vector<StageSources> given(2);
  given[0].forward = {FigureOrigin::kMeasured, 0};
  given[0].backward = {FigureOrigin::kMeasured, 0};
  given[1].forward = {FigureOrigin::kMeasured, 1};
  given[1].backward = {FigureOrigin::kAssumed, 0};
  const std::vector<StageSources> cut = CollapseSources(given, 4);
  ASSERT_EQ(cut.size(), 4u);
  EXPECT_EQ(cut[3].forward, (FigureSource{FigureOrigin::kMeasured, 0}));
  EXPECT_EQ(cut[0].backward.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(CollapseSources(given, 2), given);  // the same cut: as given
}

}  // namespace
}  // namespace pipeplan
