// Calibrate: medians in the chosen unit, the rules for kinds a profile lacks (B = I + W, I/W
// split from B, overlap 0), boundaries, the uniform model, the errors naming the stage, and
// the loop plan -> simulate -> profile -> calibrate giving the plan's own costs back.
#include "pipeplan/measurement/calibrate.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/model/stage_recut.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::Constant;

DurationStats Transfer(double seconds) { return Constant(seconds, 8); }

// Two stages measured with F and B only (as a 1F1B run), one boundary at 20 us.
Profile FbProfile() {
  Profile profile;
  profile.source = "test";
  profile.steps = 2;
  profile.stages = {{.forward = Constant(0.001),
                     .backward = Constant(0.002),
                     .backward_input = {},
                     .backward_weight = {},
                     .overlap = {}},
                    {.forward = Constant(0.003),
                     .backward = Constant(0.004),
                     .backward_input = {},
                     .backward_weight = {},
                     .overlap = {}}};
  profile.boundaries = {{.transfer = Transfer(20e-6), .late_receives = 3, .receive_overhead = {}}};
  return profile;
}

CalibrateOptions Options(TimeUnit unit = TimeUnit::kMicroseconds, bool uniform = false,
                         double input_share = 0.5) {
  return {.unit = unit, .uniform = uniform, .input_share = input_share};
}

TEST(TimeUnitTest, NamesAndScales) {
  for (const TimeUnit unit : {TimeUnit::kSeconds, TimeUnit::kMilliseconds, TimeUnit::kMicroseconds,
                              TimeUnit::kNanoseconds}) {
    EXPECT_EQ(TimeUnitFromName(TimeUnitName(unit)), unit);
  }
  EXPECT_EQ(TimeUnitName(TimeUnit::kMicroseconds), "us");
  EXPECT_EQ(SecondsPer(TimeUnit::kMilliseconds), 1e-3);
  EXPECT_EQ(TimeUnitFromName("min"), std::nullopt);
}

TEST(CalibrateTest, MediansInMicrosecondsAndBSplitInHalves) {
  const StatusOr<CostModel> costs = Calibrate(FbProfile(), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_EQ(costs->stages.size(), 2u);
  EXPECT_DOUBLE_EQ(costs->stages[0].forward, 1000);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 2000);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_input, 1000);  // no I/W measured: B / 2 each
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_weight, 1000);
  EXPECT_EQ(costs->stages[0].overlap, 0);  // not measured: a cell costs F + B
  EXPECT_DOUBLE_EQ(costs->stages[1].forward, 3000);
  EXPECT_DOUBLE_EQ(costs->stages[1].backward, 4000);
  ASSERT_EQ(costs->boundaries.size(), 1u);
  EXPECT_DOUBLE_EQ(costs->boundaries[0].latency, 20);
  EXPECT_EQ(costs->boundaries[0].bandwidth, 0);  // infinite
  EXPECT_TRUE(ValidateCostModel(*costs, 2).ok());
}

TEST(CalibrateTest, OtherUnitsAndInputShares) {
  const StatusOr<CostModel> ms = Calibrate(FbProfile(), Options(TimeUnit::kMilliseconds));
  ASSERT_TRUE(ms.ok()) << ms.status().message();
  EXPECT_DOUBLE_EQ(ms->stages[1].forward, 3);
  EXPECT_DOUBLE_EQ(ms->boundaries[0].latency, 0.02);
  EXPECT_EQ(ms->time_unit, "ms");
  // The unit travels with the cost file.
  const StatusOr<std::string> text = SerializeCostModel(*ms, ProtoFormat::kText);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("time_unit: \"ms\""), std::string::npos) << *text;
  const StatusOr<CostModel> read = ParseCostModel(*text, ProtoFormat::kText);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, *ms);

  const StatusOr<CostModel> quarter =
      Calibrate(FbProfile(), Options(TimeUnit::kSeconds, false, 0.25));
  ASSERT_TRUE(quarter.ok()) << quarter.status().message();
  EXPECT_DOUBLE_EQ(quarter->stages[1].backward_input, 0.001);
  EXPECT_DOUBLE_EQ(quarter->stages[1].backward_weight, 0.003);

  EXPECT_EQ(Calibrate(FbProfile(), Options(TimeUnit::kSeconds, false, 1.5)).status().message(),
            "the input share of B must be in [0, 1], got 1.5");
}

TEST(CalibrateTest, SplitBackwardGivesBAsIPlusW) {
  Profile profile = FbProfile();
  profile.stages[0].backward = {};
  profile.stages[0].backward_input = Constant(0.0015);
  profile.stages[0].backward_weight = Constant(0.0005);
  const StatusOr<CostModel> costs = Calibrate(profile, Options(TimeUnit::kMilliseconds));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_input, 1.5);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_weight, 0.5);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 2);
}

TEST(CalibrateTest, MeasuredBAndSplitStayIndependent) {
  Profile profile = FbProfile();
  profile.stages[0].backward_input = Constant(0.0012);
  profile.stages[0].backward_weight = Constant(0.0009);
  const StatusOr<CostModel> costs = Calibrate(profile, Options(TimeUnit::kMilliseconds));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 2);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_input, 1.2);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_weight, 0.9);
}

TEST(CalibrateTest, MeasuredOverlapIsKept) {
  Profile profile = FbProfile();
  profile.stages[1].overlap = Constant(0.005);
  const StatusOr<CostModel> costs = Calibrate(profile, Options(TimeUnit::kMilliseconds));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->stages[0].overlap, 0);
  EXPECT_DOUBLE_EQ(costs->stages[1].overlap, 5);
}

// Four stages with F = 1 s and B = 2 s, and three boundaries with nothing measured.
Profile FourStagesNothingAcross() {
  Profile profile;
  profile.stages.assign(4, StageProfile{.forward = Constant(1),
                                        .backward = Constant(2),
                                        .backward_input = {},
                                        .backward_weight = {},
                                        .overlap = {}});
  profile.boundaries.resize(3);
  return profile;
}

TEST(CalibrateTest, BoundariesWithoutACleanTransferGetTheMeanOfTheMeasuredOnes) {
  Profile profile = FourStagesNothingAcross();
  profile.boundaries[0].transfer = Transfer(1);
  profile.boundaries[1].late_receives = 16;  // nothing clean
  profile.boundaries[2].transfer = Transfer(3);
  const StatusOr<CostModel> costs = Calibrate(profile, Options(TimeUnit::kSeconds));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_EQ(costs->boundaries.size(), 3u);
  EXPECT_EQ(costs->boundaries[0].latency, 1);
  EXPECT_EQ(costs->boundaries[1].latency, 2);
  EXPECT_EQ(costs->boundaries[2].latency, 3);

  // Nothing measured anywhere: no latency.
  for (BoundaryProfile& boundary : profile.boundaries) boundary = {};
  const StatusOr<CostModel> none = Calibrate(profile, Options(TimeUnit::kSeconds));
  ASSERT_TRUE(none.ok()) << none.status().message();
  for (const BoundaryCosts& boundary : none->boundaries) EXPECT_EQ(boundary, BoundaryCosts{});
}

TEST(CalibrateTest, TheReceiveOverheadIsTheMeanNotTheMedian) {
  Profile profile = FourStagesNothingAcross();
  profile.boundaries[0].receive_overhead = SummarizeDurations({1, 1, 4});  // median 1, mean 2
  profile.boundaries[0].late_receives = 3;
  profile.boundaries[2].receive_overhead = SummarizeDurations({6});
  profile.boundaries[2].late_receives = 1;
  const StatusOr<CostModel> costs = Calibrate(profile, Options(TimeUnit::kMilliseconds));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_EQ(costs->boundaries.size(), 3u);
  EXPECT_DOUBLE_EQ(costs->boundaries[0].receive_overhead, 2000);
  EXPECT_DOUBLE_EQ(costs->boundaries[1].receive_overhead, 4000);  // none: the mean of the others
  EXPECT_DOUBLE_EQ(costs->boundaries[2].receive_overhead, 6000);
  const StatusOr<CostModel> uniform =
      Calibrate(profile, Options(TimeUnit::kMilliseconds, /*uniform=*/true));
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  ASSERT_EQ(uniform->boundaries.size(), 3u);
  for (const BoundaryCosts& boundary : uniform->boundaries) {
    EXPECT_DOUBLE_EQ(boundary.receive_overhead, 4000);
  }
}

TEST(CalibrateTest, AProfilersLatencyAndBandwidthWin) {
  Profile profile = FbProfile();
  profile.boundaries[0].latency = 5e-6;
  profile.boundaries[0].bandwidth = 1e9;  // bytes per second
  profile.boundaries[0].activation_bytes = 4096;
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_DOUBLE_EQ(costs->boundaries[0].latency, 5);
  EXPECT_DOUBLE_EQ(costs->boundaries[0].bandwidth, 1000);  // bytes per us
  EXPECT_EQ(costs->boundaries[0].activation_bytes, 4096);
}

TEST(CalibrateTest, OneStageHasTheDefaultBoundary) {
  Profile profile = FbProfile();
  profile.stages.pop_back();
  profile.boundaries.clear();
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->boundaries, std::vector<BoundaryCosts>{BoundaryCosts{}});
}

TEST(CalibrateTest, UniformTakesTheMeanOverStages) {
  Profile profile = FbProfile();
  profile.stages[0].overlap = Constant(0.004);  // stage 1 has no overlap measured
  const StatusOr<CostModel> costs =
      Calibrate(profile, Options(TimeUnit::kMilliseconds, /*uniform=*/true));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  // One entry per stage, all the same: the file keeps the model's depth.
  ASSERT_EQ(costs->stages.size(), 2u);
  EXPECT_EQ(costs->stages[0], costs->stages[1]);
  EXPECT_DOUBLE_EQ(costs->stages[0].forward, 2);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward, 3);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_input, 1.5);
  EXPECT_DOUBLE_EQ(costs->stages[0].backward_weight, 1.5);
  EXPECT_DOUBLE_EQ(costs->stages[0].overlap, 4);  // over the stages that measured one
  ASSERT_EQ(costs->boundaries.size(), 1u);
  EXPECT_DOUBLE_EQ(costs->boundaries[0].latency, 0.02);
  EXPECT_TRUE(ValidateCostModel(*costs, 2).ok());
  // So a plan of another cut gets them by depth: one stage holding the whole model, both.
  const StatusOr<StageFigures> whole = FitStageFigures(*costs, MemoryModel{}, Topology{});
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->costs.stages.size(), 1u);
  EXPECT_DOUBLE_EQ(whole->costs.stages[0].forward, 4);
}

TEST(CalibrateErrorTest, NamesTheStage) {
  Profile empty = FbProfile();
  empty.stages[1] = {};
  EXPECT_EQ(Calibrate(empty, Options()).status().message(),
            "profile stage 1: no samples (no F, B, I, W or overlap measured)");

  Profile no_forward = FbProfile();
  no_forward.stages[0].forward = {};
  EXPECT_EQ(Calibrate(no_forward, Options()).status().message(),
            "profile stage 0: no forward (F) measured");

  Profile no_backward = FbProfile();
  no_backward.stages[1].backward = {};
  EXPECT_EQ(Calibrate(no_backward, Options()).status().message(),
            "profile stage 1: no backward measured (B, or I and W)");

  Profile half_split = FbProfile();
  half_split.stages[0].backward_weight = Constant(0.001);
  EXPECT_EQ(Calibrate(half_split, Options()).status().message(),
            "profile stage 0: W measured without I; a split backward needs both halves "
            "measured, or neither");
}

TEST(CalibrateErrorTest, AnInvalidProfileIsRefused) {
  Profile profile = FbProfile();
  profile.boundaries.clear();
  EXPECT_EQ(Calibrate(profile, Options()).status().message(),
            "profile: boundaries: expected 1 entries (one between each two of the 2 stages), "
            "got 0");
}

// plan -> simulate -> profile -> calibrate gives the plan's costs back: the simulator's
// timelines hold every action for exactly its cost, its clean transfers take exactly the
// latency, and a receive posted after its data landed exactly the receive overhead.
class CalibrateLoopTest : public ::testing::TestWithParam<double> {};

TEST_P(CalibrateLoopTest, SimulatedRunGivesThePlansCostsBack) {
  const double receive_overhead = GetParam();
  PlanRequest request = testing::MakeRequest("zb-h1", 4, 8);
  request.costs.stages.clear();
  for (int s = 0; s < 4; ++s) {
    const double f = 100 + 10 * s;
    request.costs.stages.push_back({.forward = f,
                                    .backward = 2 * f,
                                    .backward_input = 1.25 * f,
                                    .backward_weight = 0.75 * f,
                                    .overlap = 0});
  }
  request.costs.boundaries = {
      {.latency = 7, .bandwidth = 0, .activation_bytes = 0, .receive_overhead = receive_overhead}};
  const Plan plan = testing::BuildOrDie(request);
  const std::vector<Timeline> steps = {testing::SimulateOrDie(plan)};
  // The plan's unit is us: 1e-6 s per unit.
  const StatusOr<Profile> profile = BuildProfile(
      plan, steps, {.seconds_per_unit = 1e-6, .source = "simulated", .step_names = {}});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  const StatusOr<CostModel> costs = Calibrate(*profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_EQ(costs->stages.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const StageCosts& want = request.costs.stages[s];
    const StageCosts& got = costs->stages[s];
    EXPECT_DOUBLE_EQ(got.forward, want.forward);
    EXPECT_DOUBLE_EQ(got.backward_input, want.backward_input);
    EXPECT_DOUBLE_EQ(got.backward_weight, want.backward_weight);
    EXPECT_DOUBLE_EQ(got.backward, want.backward_input + want.backward_weight);  // no B ran
    EXPECT_EQ(got.overlap, 0);
  }
  ASSERT_EQ(costs->boundaries.size(), 3u);
  for (const BoundaryCosts& boundary : costs->boundaries) {
    EXPECT_DOUBLE_EQ(boundary.latency, 7);
    EXPECT_DOUBLE_EQ(boundary.receive_overhead, receive_overhead);
  }
  // And the calibrated model predicts the same step.
  const StatusOr<Timeline> again = Simulate(plan, *costs, plan.request.memory);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_NEAR(again->metrics.makespan, steps[0].metrics.makespan, 1e-9 * steps[0].metrics.makespan);
}

// 0, and an overhead both hidden by late data (below the latency) and not.
INSTANTIATE_TEST_SUITE_P(ReceiveOverheads, CalibrateLoopTest, ::testing::Values(0.0, 3.0, 12.0));

// DualPipe's two model copies, profiled: the figures say they are two copies (chains 2), the
// boundary where the copies meet on one rank hands nothing over, and a plan of one chain (the
// V shape's eight stages) gets the model the profile measured, not the two copies as one
// model of twice the depth.
TEST(CalibrateTest, ADualPlacementsProfileServesAPlanOfOneChain) {
  PlanRequest request = testing::MakeRequest("dualpipe", 4, 8, 2);
  request.costs.chains = 2;
  request.costs.stages.clear();
  for (int copy = 0; copy < 2; ++copy) {
    for (int depth = 0; depth < 4; ++depth) {
      const double f = 100 + 10 * depth;
      request.costs.stages.push_back(
          {.forward = f, .backward = 2 * f, .backward_input = f, .backward_weight = f});
    }
  }
  request.costs.boundaries = {{.latency = 7}};
  const Plan plan = testing::BuildOrDie(request);
  ASSERT_EQ(plan.request.costs.stages, request.costs.stages);  // fits as it is
  const StatusOr<Profile> profile =
      BuildProfile(plan, std::vector<Timeline>{testing::SimulateOrDie(plan)},
                   {.seconds_per_unit = 1e-6, .source = "simulated", .step_names = {}});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->chains, 2);
  ASSERT_EQ(profile->boundaries.size(), 7u);
  EXPECT_FALSE(profile->boundaries[3].same_rank);  // stage 3 (copy A's last), 4 (B's first)
  const StatusOr<CostModel> costs = Calibrate(*profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->chains, 2);
  ASSERT_EQ(costs->stages.size(), 8u);
  for (size_t s = 0; s < 8; ++s) {
    EXPECT_DOUBLE_EQ(costs->stages[s].forward, request.costs.stages[s].forward) << s;
  }

  const Topology v_shape{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kVShape};
  const StatusOr<StageFigures> one_chain = FitStageFigures(*costs, MemoryModel{}, v_shape);
  ASSERT_TRUE(one_chain.ok()) << one_chain.status().message();
  ASSERT_EQ(one_chain->costs.stages.size(), 8u);
  EXPECT_EQ(one_chain->costs.chains, 1);
  for (int s = 0; s < 8; ++s) {
    const int depth = s / 2;  // the chain's stage it is half of
    EXPECT_DOUBLE_EQ(one_chain->costs.stages[s].forward, (100 + 10 * depth) / 2.0) << s;
  }
}

// FbProfile with memory: stage s's F keeps `kept[s]` bytes and B frees `freed[s]`; ranks
// held 5000 and 7000 when their first compute began.
Profile FbProfileWithBytes(std::vector<double> kept, std::vector<double> freed) {
  Profile profile = FbProfile();
  for (size_t s = 0; s < profile.stages.size(); ++s) {
    profile.stages[s].memory.kept_by_forward = Constant(kept[s]);
    profile.stages[s].memory.freed_by_backward = Constant(freed[s]);
  }
  profile.static_bytes = {5000, 7000};
  return profile;
}

TEST(CalibrateMemoryTest, BytesHeldPerStageAndTheStaticMemoryOfEachRank) {
  const StatusOr<CostModel> costs =
      Calibrate(FbProfileWithBytes({1000, 3000}, {1000, 2900}), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_TRUE(costs->memory.has_value());
  const MemoryModel& memory = *costs->memory;
  EXPECT_EQ(memory.unit, MemoryUnit::kBytes);
  ASSERT_EQ(memory.stages.size(), 2u);
  EXPECT_EQ(memory.stages[0], (StageMemory{.activation = 1000}));
  // B freed 100 less than F kept: held until the step ends.
  EXPECT_EQ(memory.stages[1], (StageMemory{.activation = 3000, .retained = 100}));
  EXPECT_EQ(memory.static_per_rank, 7000);
  EXPECT_EQ(memory.static_by_rank, (std::vector<double>{5000, 7000}));
  EXPECT_FALSE(memory.limit.has_value());

  const StatusOr<CostModel> uniform = Calibrate(FbProfileWithBytes({1000, 3000}, {1000, 2900}),
                                                Options(TimeUnit::kMicroseconds, true));
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  ASSERT_TRUE(uniform->memory.has_value());
  EXPECT_EQ(uniform->memory->stages,
            (std::vector<StageMemory>(2, {.activation = 2000, .retained = 50})));

  Profile same_static = FbProfileWithBytes({1000, 3000}, {1000, 3000});
  same_static.static_bytes = {7000, 7000};
  const StatusOr<CostModel> one_figure = Calibrate(same_static, Options());
  ASSERT_TRUE(one_figure.ok()) << one_figure.status().message();
  EXPECT_EQ(one_figure->memory->static_per_rank, 7000);
  EXPECT_TRUE(one_figure->memory->static_by_rank.empty());
}

// FbProfileWithBytes whose stages hold 1500 and 2500 of their ranks' 1700 and 2800 bytes.
Profile ProfileWithStageStatic() {
  Profile profile = FbProfileWithBytes({1000, 3000}, {1000, 3000});
  profile.static_bytes = {1700, 2800};
  profile.stages[0].memory.static_bytes = 1500;
  profile.stages[1].memory.static_bytes = 2500;
  profile.own_static_bytes = {200, 300};
  return profile;
}

// Where the profile tells each stage's own static memory, the stages carry it and the ranks
// the rest; uniform: the share of a stage between the ends, and what the ends hold beyond it.
TEST(CalibrateMemoryTest, StaticMemoryThatMovesWithItsStage) {
  const Profile profile = ProfileWithStageStatic();
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  const MemoryModel& memory = *costs->memory;
  EXPECT_EQ(memory.stages[0].static_bytes, 1500);
  EXPECT_EQ(memory.stages[1].static_bytes, 2500);
  EXPECT_EQ(memory.static_per_rank, 300);
  EXPECT_EQ(memory.static_by_rank, (std::vector<double>{200, 300}));
  EXPECT_EQ(memory.first_stage_static, 0);
  EXPECT_EQ(memory.last_stage_static, 0);

  // Two stages: the share is the smaller end's.
  const StatusOr<CostModel> uniform = Calibrate(profile, Options(TimeUnit::kMicroseconds, true));
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  EXPECT_EQ(uniform->memory->stages.front().static_bytes, 1500);
  EXPECT_EQ(uniform->memory->first_stage_static, 0);
  EXPECT_EQ(uniform->memory->last_stage_static, 1000);
}

// Of the stages' static bytes, the data (stage 0's inputs, stage 1's targets) go to the chain's
// ends, per microbatch, so that a plan cutting the model otherwise keeps them there
// (stage_recut.h) and a plan with another M scales them; each stage keeps the rest. Uniform:
// the ends' extras are their surplus over the share.
TEST(CalibrateMemoryTest, TheDataGoToTheChainsEnds) {
  Profile profile = ProfileWithStageStatic();
  profile.stages[0].memory.input_bytes = 400;
  profile.stages[1].memory.target_bytes = 700;
  for (StageProfile& stage : profile.stages) stage.memory.microbatches = 4;
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  const MemoryModel& memory = *costs->memory;
  EXPECT_EQ(memory.stages[0].static_bytes, 1100);
  EXPECT_EQ(memory.stages[1].static_bytes, 1800);
  EXPECT_EQ(memory.first_stage_data_per_microbatch, 100);
  EXPECT_EQ(memory.last_stage_data_per_microbatch, 175);
  EXPECT_EQ(memory.first_stage_static, 0);
  EXPECT_EQ(memory.last_stage_static, 0);
  // Each rank's static memory as measured at the profiled M = 4, data included; at M = 8 the
  // data double.
  const StageMap at_4(Topology{.ranks = 2, .stages_per_rank = 1, .microbatches = 4});
  EXPECT_EQ(memory.StaticOf(RankId(0), at_4), 1700);
  EXPECT_EQ(memory.StaticOf(RankId(1), at_4), 2800);
  const StageMap at_8(Topology{.ranks = 2, .stages_per_rank = 1, .microbatches = 8});
  EXPECT_EQ(memory.StaticOf(RankId(0), at_8), 2100);
  EXPECT_EQ(memory.StaticOf(RankId(1), at_8), 3500);

  const StatusOr<CostModel> uniform = Calibrate(profile, Options(TimeUnit::kMicroseconds, true));
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  EXPECT_EQ(uniform->memory->stages.front().static_bytes, 1100);  // the smaller end's
  EXPECT_EQ(uniform->memory->first_stage_static, 0);
  EXPECT_EQ(uniform->memory->last_stage_static, 700);
  EXPECT_EQ(uniform->memory->first_stage_data_per_microbatch, 100);
  EXPECT_EQ(uniform->memory->last_stage_data_per_microbatch, 175);
}

TEST(CalibrateMemoryTest, UniformStaticIsTheMiddleStagesMeanAndTheEndsExtras) {
  Profile profile = FbProfileWithBytes({1000, 1000}, {1000, 1000});
  profile.stages.resize(4, profile.stages[1]);
  profile.boundaries.resize(3, profile.boundaries[0]);
  const double own[] = {1300, 1000, 1200, 1600};
  for (size_t s = 0; s < 4; ++s) profile.stages[s].memory.static_bytes = own[s];
  profile.static_bytes = {1310, 1010, 1210, 1610};
  profile.own_static_bytes = {10, 10, 10, 10};
  const StatusOr<CostModel> uniform = Calibrate(profile, Options(TimeUnit::kMicroseconds, true));
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  const MemoryModel& memory = *uniform->memory;
  ASSERT_EQ(memory.stages.size(), 4u);
  for (const StageMemory& stage : memory.stages) {
    EXPECT_EQ(stage.static_bytes, 1100);  // (1000 + 1200) / 2
  }
  EXPECT_EQ(memory.first_stage_static, 200);
  EXPECT_EQ(memory.last_stage_static, 500);
  EXPECT_EQ(memory.static_per_rank, 10);
  EXPECT_TRUE(memory.static_by_rank.empty());
}

// A stage whose RECV_F allocates 200 and RECV_B 100: the activation counts the received input;
// I frees what it freed less the received gradient (which the model never allocated), and
// the received gradient sits under I, in its transient; what the backward did not free of
// all that (the gradient it sent) is retained.
// Every stage: RECV_F 200 B, F 1000, RECV_B 100; I frees 350, W 650; transients F 10, I 20,
// W 30.
Profile ProfileWithReceivedMessages() {
  Profile profile = FbProfileWithBytes({1000, 1000}, {1000, 1000});
  for (StageProfile& stage : profile.stages) {
    StageMemoryProfile& m = stage.memory;
    m.freed_by_backward = {};
    m.received_forward = Constant(200);
    m.received_backward = Constant(100);
    m.freed_by_input = Constant(350);
    m.freed_by_weight = Constant(650);
    m.forward_transient = Constant(10);
    m.input_transient = Constant(20);
    m.weight_transient = Constant(30);
  }
  return profile;
}

TEST(CalibrateMemoryTest, ReceivedMessagesAndTransients) {
  const StatusOr<CostModel> costs = Calibrate(ProfileWithReceivedMessages(), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->memory->stages[0], (StageMemory{.activation = 1200,
                                                   .freed_by_input = 250,
                                                   .forward_transient = 10,
                                                   .backward_transient = 100,
                                                   .input_transient = 120,
                                                   .weight_transient = 30,
                                                   .retained = 300,
                                                   .received_input = 200,
                                                   .received_gradient = 100}));
}

// Stages 0 and 1 on one rank: stage 1's I leaves its input gradient (100 B) to stage 0, whose
// I frees it with its own 300 B. Calibrate gives the 100 B back to stage 1 (retained, which
// the model frees at stage 0's I), so stage 0's I frees 300 of its own; without the mark it
// would be counted twice, once held by stage 1 and once freed by stage 0.
TEST(CalibrateMemoryTest, AGradientHandedOverOnOneRankIsCountedOnce) {
  Profile profile = FbProfileWithBytes({1000, 1000}, {1000, 1000});
  for (StageProfile& stage : profile.stages) stage.memory.freed_by_backward = {};
  profile.stages[1].memory.freed_by_input = Constant(200);
  profile.stages[1].memory.freed_by_weight = Constant(700);
  profile.stages[0].memory.freed_by_input = Constant(400);
  profile.stages[0].memory.freed_by_weight = Constant(700);
  ASSERT_EQ(profile.boundaries.size(), 1u);
  profile.boundaries[0].same_rank = true;
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->memory->stages[1],
            (StageMemory{.activation = 1000, .freed_by_input = 200, .retained = 100}));
  EXPECT_EQ(costs->memory->stages[0], (StageMemory{.activation = 1000, .freed_by_input = 300}));

  profile.boundaries[0].same_rank = false;  // as if stage 1 had sent it: all of 400 is stage 0's
  const StatusOr<CostModel> sent = Calibrate(profile, Options());
  ASSERT_TRUE(sent.ok()) << sent.status().message();
  EXPECT_EQ(sent->memory->stages[0], (StageMemory{.activation = 1000, .freed_by_input = 400}));
}

TEST(CalibrateMemoryTest, WhatIFreesComesFromTheSplitBackward) {
  Profile profile = FbProfileWithBytes({1000, 1000}, {1000, 1000});
  for (StageProfile& stage : profile.stages) {
    stage.memory.freed_by_backward = {};
    stage.memory.freed_by_input = Constant(300);
    stage.memory.freed_by_weight = Constant(700);
  }
  profile.stages[1].memory.freed_by_input = Constant(-50);  // an I that allocates: frees none
  profile.stages[1].memory.freed_by_weight = Constant(1050);
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->memory->stages[0].freed_by_input, 300);
  EXPECT_EQ(costs->memory->stages[1].freed_by_input, 0);
  // What that I allocated, W frees: held between the two.
  EXPECT_EQ(costs->memory->stages[0].allocated_by_input, 0);
  EXPECT_EQ(costs->memory->stages[1].allocated_by_input, 50);
}

// Torch's runtime: B frees 900 of a microbatch's 1000 (retained 100, to the step's end), while
// I (allocating 400) and W (freeing 1100) of a zero-bubble run of the same model free 700; the
// split's extra 200 is kept as such, and the stage's gradients, which the job freed between
// steps, become what its first backward allocates.
TEST(CalibrateMemoryTest, TorchsSplitBackwardKeepsMoreAndGradientsComeAtTheFirstBackward) {
  Profile profile = FbProfileWithBytes({1000, 1000}, {900, 900});
  StageMemoryProfile& last = profile.stages[1].memory;
  last.freed_by_input = Constant(-400);
  last.freed_by_weight = Constant(1100);
  last.gradient_bytes = 640;
  const StatusOr<CostModel> costs = Calibrate(profile, Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->memory->stages[0], (StageMemory{.activation = 1000, .retained = 100}));
  EXPECT_EQ(costs->memory->stages[1], (StageMemory{.activation = 1000,
                                                   .retained = 100,
                                                   .gradient = 640,
                                                   .allocated_by_input = 400,
                                                   .split_retained_extra = 200}));
  // Without the B run, the split's own figure is the retained one.
  last.freed_by_backward = {};
  const StatusOr<CostModel> split_only = Calibrate(profile, Options());
  ASSERT_TRUE(split_only.ok()) << split_only.status().message();
  EXPECT_EQ(split_only->memory->stages[1].retained, 300);
  EXPECT_EQ(split_only->memory->stages[1].split_retained_extra, 0);
}

TEST(CalibrateMemoryTest, AProfileWithoutBytesGivesNoMemoryModel) {
  const StatusOr<CostModel> costs = Calibrate(FbProfile(), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_FALSE(costs->memory.has_value());
}

TEST(CalibrateMemoryTest, InconsistentMemoryIsAnErrorNamingTheStageAndField) {
  // Stage 1's B frees 4000 of the 3000 its F kept: more than a received gradient explains.
  const StatusOr<CostModel> freed_more =
      Calibrate(FbProfileWithBytes({1000, 3000}, {1000, 4000}), Options());
  ASSERT_FALSE(freed_more.ok());
  EXPECT_EQ(freed_more.status().message(),
            "profile stage 1: memory.freed_by_backward: frees 4000 bytes (median) but the "
            "microbatch allocated 3000 (memory.kept_by_forward + received_forward + "
            "received_backward); a backward cannot free more than its microbatch allocated");
  const StatusOr<CostModel> keeps_nothing =
      Calibrate(FbProfileWithBytes({0, 3000}, {0, 3000}), Options());
  ASSERT_FALSE(keeps_nothing.ok());
  EXPECT_NE(keeps_nothing.status().message().find(
                "profile stage 0: memory.kept_by_forward.median: F keeps 0 bytes"),
            std::string::npos)
      << keeps_nothing.status().message();
  Profile one_stage = FbProfileWithBytes({1000, 3000}, {1000, 3000});
  one_stage.stages[0].memory = {};
  const StatusOr<CostModel> missing = Calibrate(one_stage, Options());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("profile stage 0: memory.kept_by_forward"),
            std::string::npos)
      << missing.status().message();
}

// One line of a text cost file replaced by a bad one, and what the error must name.
struct BadLine {
  std::string line;
  std::string replacement;
  std::string named;
};

// `costs` reads back from its text cost file as it was, and each bad line is refused with an
// error naming its field.
void ExpectRoundTripAndRefusals(const CostModel& costs, const std::vector<BadLine>& bad_lines) {
  const StatusOr<std::string> text = SerializeCostModel(costs, ProtoFormat::kText);
  ASSERT_TRUE(text.ok()) << text.status().message();
  const StatusOr<CostModel> back = ParseCostModel(*text, ProtoFormat::kText);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, costs);
  for (const BadLine& bad : bad_lines) {
    SCOPED_TRACE(bad.replacement);
    std::string edited = *text;
    const size_t at = edited.find(bad.line + "\n");
    ASSERT_NE(at, std::string::npos) << edited;
    edited.replace(at, bad.line.size(), bad.replacement);
    const StatusOr<CostModel> parsed = ParseCostModel(edited, ProtoFormat::kText);
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find(bad.named), std::string::npos)
        << parsed.status().message();
  }
}

TEST(CalibrateMemoryTest, TheCostFileKeepsItsMemoryModelAndRefusesBadBytesNamingTheField) {
  const StatusOr<CostModel> costs =
      Calibrate(FbProfileWithBytes({1000, 3000}, {1000, 2900}), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ExpectRoundTripAndRefusals(
      *costs, {{"activation: 1000", "activation: -5", "activation"},
               {"static_per_rank: 7000", "static_per_rank: nan", "static_per_rank"}});
}

// The static memory that moves with a stage survives the file, and a bad figure is refused
// naming its field.
TEST(CalibrateMemoryTest, TheCostFileKeepsEachStagesStaticBytesAndRefusesBadOnes) {
  const StatusOr<CostModel> costs =
      Calibrate(ProfileWithStageStatic(), Options(TimeUnit::kMicroseconds, true));
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(costs->memory->last_stage_static, 1000);
  ExpectRoundTripAndRefusals(
      *costs, {{"static_bytes: 1500", "static_bytes: -1", "memory.stages[0].static_bytes"},
               {"last_stage_static: 1000", "last_stage_static: nan", "memory.last_stage_static"}});
}

// The received messages survive the file; a received gradient above the backward's transient,
// which counts it, is refused naming the stage and field.
TEST(CalibrateMemoryTest, TheCostFileKeepsTheReceivedMessagesAndRefusesBadOnes) {
  const StatusOr<CostModel> costs = Calibrate(ProfileWithReceivedMessages(), Options());
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ExpectRoundTripAndRefusals(
      *costs,
      {{"received_input: 200", "received_input: -1", "memory.stages[0].received_input"},
       {"received_gradient: 100", "received_gradient: 500",
        "memory.stages[0].received_gradient: 500 is above the backward's transient (120)"}});
}

}  // namespace
}  // namespace pipeplan
