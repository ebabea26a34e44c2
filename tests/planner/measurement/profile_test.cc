// BuildProfile and SummarizeDurations: exact medians and quantiles from hand-made timelines,
// which stage overlap cells and transfers count for, the clean-transfer rule, and the errors
// for timelines that do not fit their plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/measurement/build_profile.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;

// One timeline per rank of `plan`, every action at [0, 0] until Set says otherwise.
Timeline BlankTimeline(const Plan& plan) {
  Timeline timeline;
  timeline.source = TimelineSource::kMeasured;
  for (const RankProgram& program : plan.programs) {
    RankTimeline& rank = timeline.ranks.emplace_back();
    rank.rank = program.rank;
    rank.actions.resize(program.actions.size());
  }
  return timeline;
}

// Index of the action printed as `token` ("0SEND_F0") in `rank`'s program.
size_t IndexOf(const Plan& plan, int rank, std::string_view token) {
  const std::vector<Action>& actions = plan.programs[rank].actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (ToString(actions[i]) == token) return i;
  }
  ADD_FAILURE() << "rank " << rank << " has no action " << token;
  return 0;
}

void Set(Timeline& timeline, const Plan& plan, int rank, std::string_view token, double start,
         double end) {
  ActionTiming& timing = timeline.ranks[rank].actions[IndexOf(plan, rank, token)];
  timing.start = start;
  timing.end = end;
  timing.thread = IsComm(plan.programs[rank].actions[IndexOf(plan, rank, token)].kind)
                      ? kCommThread
                      : kComputeThread;
}

// 1F1B on 2 ranks with 1 microbatch:
//   rank 0: 0F0 0SEND_F0 0RECV_B0 0B0
//   rank 1: 1RECV_F0 1F0 1B0 1SEND_B0
Plan TinyPlan() { return BuildOrDie(MakeRequest("1f1b", 2, 1)); }

// One step of TinyPlan: F lasts `f0` and `f1` on stages 0 and 1, B twice that; the activation
// takes 0.25 and the gradient 0.5 from the send's start to the receive's end, and both
// receives were posted before their sends started.
Timeline TinyStep(const Plan& plan, double f0, double f1) {
  Timeline t = BlankTimeline(plan);
  Set(t, plan, 0, "0F0", 0, f0);
  Set(t, plan, 0, "0SEND_F0", f0, f0 + 0.25);
  Set(t, plan, 1, "1RECV_F0", 0, f0 + 0.25);
  Set(t, plan, 1, "1F0", f0 + 0.25, f0 + 0.25 + f1);
  Set(t, plan, 1, "1B0", f0 + 0.25 + f1, f0 + 0.25 + 3 * f1);
  const double gradient_sent = f0 + 0.25 + 3 * f1;
  Set(t, plan, 1, "1SEND_B0", gradient_sent, gradient_sent + 0.5);
  Set(t, plan, 0, "0RECV_B0", f0, gradient_sent + 0.5);
  Set(t, plan, 0, "0B0", gradient_sent + 0.5, gradient_sent + 0.5 + 2 * f0);
  return t;
}

TEST(SummarizeDurationsTest, NothingMeasuredIsAllZeros) {
  EXPECT_EQ(SummarizeDurations({}), DurationStats{});
}

TEST(SummarizeDurationsTest, OneSampleIsEveryFigure) {
  EXPECT_EQ(SummarizeDurations({2.5}), (DurationStats{.samples = 1,
                                                      .median = 2.5,
                                                      .min = 2.5,
                                                      .max = 2.5,
                                                      .p10 = 2.5,
                                                      .p90 = 2.5,
                                                      .mean = 2.5}));
}

TEST(SummarizeDurationsTest, ElevenSamplesHitTheQuantilesExactly) {
  // Positions q (n - 1) = 1, 5 and 9: no interpolation.
  EXPECT_EQ(SummarizeDurations({7, 3, 10, 0, 5, 1, 9, 2, 8, 4, 6}),
            (DurationStats{
                .samples = 11, .median = 5, .min = 0, .max = 10, .p10 = 1, .p90 = 9, .mean = 5}));
}

TEST(SummarizeDurationsTest, TheMeanStaysWithinMinAndMax) {
  EXPECT_DOUBLE_EQ(SummarizeDurations({4, 1, 3, 2}).mean, 2.5);
  EXPECT_DOUBLE_EQ(SummarizeDurations({10, 0, 0, 0, 0}).mean, 2);
  // Three times 0.1 sums to 0.30000000000000004, and a third of that is above 0.1.
  const DurationStats same = SummarizeDurations({0.1, 0.1, 0.1});
  EXPECT_EQ(same.mean, 0.1);
  EXPECT_TRUE(ValidateProfile({.source = "",
                               .steps = 1,
                               .stages = {StageProfile{.forward = same,
                                                       .backward = same,
                                                       .backward_input = {},
                                                       .backward_weight = {},
                                                       .overlap = {}}},
                               .boundaries = {}})
                  .ok());
}

TEST(SummarizeDurationsTest, QuantilesInterpolateBetweenTheClosestRanks) {
  // n = 4: the median sits halfway between the middle two, p10 at 0.3 and p90 at 2.7.
  const DurationStats four = SummarizeDurations({4, 1, 3, 2});
  EXPECT_EQ(four.samples, 4);
  EXPECT_EQ(four.median, 2.5);
  EXPECT_DOUBLE_EQ(four.p10, 1.3);
  EXPECT_DOUBLE_EQ(four.p90, 3.7);
  EXPECT_EQ(four.min, 1);
  EXPECT_EQ(four.max, 4);
  // n = 3: positions 0.2 and 1.8.
  const DurationStats three = SummarizeDurations({11, 1, 6});
  EXPECT_EQ(three.median, 6);
  EXPECT_DOUBLE_EQ(three.p10, 2);
  EXPECT_DOUBLE_EQ(three.p90, 10);
}

TEST(BuildProfileTest, DurationsAndTransfersOfHandMadeSteps) {
  const Plan plan = TinyPlan();
  // Three steps; F on stage 0 lasts 1, 2, 4 and on stage 1 3, 3, 1. In seconds: x 0.5.
  const std::vector<Timeline> steps = {TinyStep(plan, 1, 3), TinyStep(plan, 2, 3),
                                       TinyStep(plan, 4, 1)};
  const StatusOr<Profile> profile =
      BuildProfile(plan, steps, {.seconds_per_unit = 0.5, .source = "hand", .step_names = {}});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->source, "hand");
  EXPECT_EQ(profile->steps, 3);
  ASSERT_EQ(profile->stages.size(), 2u);
  // Stage 0: F {0.5, 1, 2}, B twice F {1, 2, 4}.
  EXPECT_EQ(profile->stages[0].forward, (DurationStats{.samples = 3,
                                                       .median = 1,
                                                       .min = 0.5,
                                                       .max = 2,
                                                       .p10 = 0.6,
                                                       .p90 = 1.8,
                                                       .mean = 3.5 / 3}));
  EXPECT_EQ(
      profile->stages[0].backward,
      (DurationStats{
          .samples = 3, .median = 2, .min = 1, .max = 4, .p10 = 1.2, .p90 = 3.6, .mean = 7.0 / 3}));
  // Stage 1: F {0.5, 1.5, 1.5}, B {1, 3, 3}.
  EXPECT_EQ(profile->stages[1].forward.median, 1.5);
  EXPECT_EQ(profile->stages[1].forward.min, 0.5);
  EXPECT_DOUBLE_EQ(profile->stages[1].forward.p10, 0.7);
  EXPECT_EQ(profile->stages[1].forward.p90, 1.5);
  EXPECT_EQ(profile->stages[1].backward.median, 3);
  for (const StageProfile& stage : profile->stages) {
    EXPECT_EQ(stage.backward_input, DurationStats{});
    EXPECT_EQ(stage.backward_weight, DurationStats{});
    EXPECT_EQ(stage.overlap, DurationStats{});
  }
  // One boundary: per step an activation (0.25 -> 0.125 s) and a gradient (0.5 -> 0.25 s).
  ASSERT_EQ(profile->boundaries.size(), 1u);
  const BoundaryProfile& boundary = profile->boundaries[0];
  EXPECT_EQ(boundary.late_receives, 0);
  EXPECT_EQ(boundary.transfer.samples, 6);
  EXPECT_EQ(boundary.transfer.min, 0.125);
  EXPECT_EQ(boundary.transfer.median, 0.1875);
  EXPECT_EQ(boundary.transfer.max, 0.25);
  EXPECT_EQ(boundary.latency, 0);  // timelines cannot tell latency from bandwidth
  EXPECT_EQ(boundary.bandwidth, 0);
  EXPECT_EQ(boundary.activation_bytes, 0);
  EXPECT_EQ(boundary.receive_overhead, DurationStats{});  // no receive was late
}

TEST(BuildProfileTest, AReceivePostedAfterItsSendStartedIsALateReceive) {
  const Plan plan = TinyPlan();
  Timeline step = TinyStep(plan, 1, 1);
  // The gradient's send starts at 1.25 + 3 = 4.25; rank 0 now posts its receive at 4.5 and
  // gets the data at once: 0.25 would say nothing about the wire.
  Set(step, plan, 0, "0RECV_B0", 4.5, 4.75);
  const StatusOr<Profile> profile = BuildProfile(plan, std::vector<Timeline>{step}, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->boundaries[0].late_receives, 1);
  EXPECT_EQ(profile->boundaries[0].transfer.samples, 1);
  EXPECT_EQ(profile->boundaries[0].transfer.median, 0.25);  // the activation only
  // Posted at the very moment the send starts still counts as clean.
  Set(step, plan, 0, "0RECV_B0", 4.25, 4.75);
  const StatusOr<Profile> at_once = BuildProfile(plan, std::vector<Timeline>{step}, {});
  ASSERT_TRUE(at_once.ok()) << at_once.status().message();
  EXPECT_EQ(at_once->boundaries[0].late_receives, 0);
  EXPECT_EQ(at_once->boundaries[0].transfer.max, 0.5);
}

TEST(BuildProfileTest, AReceivePostedAfterItsDataLandedGivesTheReceiveOverhead) {
  const Plan plan = TinyPlan();
  // The one clean transfer, the activation, takes 0.25: the gradient sent at 4.25 has landed
  // by 4.5. A receive posted then and done at 4.875 took 0.375 by itself.
  Timeline landed = TinyStep(plan, 1, 1);
  Set(landed, plan, 0, "0RECV_B0", 4.5, 4.875);
  // Posted at 4.375 the data may still have been on its way: late, but not an overhead.
  Timeline in_flight = TinyStep(plan, 1, 1);
  Set(in_flight, plan, 0, "0RECV_B0", 4.375, 4.875);
  const StatusOr<Profile> profile =
      BuildProfile(plan, std::vector<Timeline>{landed, in_flight, landed}, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  const BoundaryProfile& boundary = profile->boundaries[0];
  EXPECT_EQ(boundary.late_receives, 3);
  EXPECT_EQ(boundary.transfer.median, 0.25);
  EXPECT_EQ(boundary.receive_overhead, (DurationStats{.samples = 2,
                                                      .median = 0.375,
                                                      .min = 0.375,
                                                      .max = 0.375,
                                                      .p10 = 0.375,
                                                      .p90 = 0.375,
                                                      .mean = 0.375}));
  EXPECT_TRUE(ValidateProfile(*profile).ok());

  // With the activation's receive late too there is no clean transfer to say when data lands:
  // no receive overhead is measured.
  Set(landed, plan, 1, "1RECV_F0", 1.125, 1.25);
  const StatusOr<Profile> all_late = BuildProfile(plan, std::vector<Timeline>{landed}, {});
  ASSERT_TRUE(all_late.ok()) << all_late.status().message();
  EXPECT_EQ(all_late->boundaries[0].late_receives, 2);
  EXPECT_EQ(all_late->boundaries[0].transfer.samples, 0);
  EXPECT_EQ(all_late->boundaries[0].receive_overhead, DurationStats{});
}

TEST(BuildProfileTest, SimulatedTimelinesGiveBackThePlansCosts) {
  // zb-h1 splits B into I and W; the simulator's clean transfers take exactly the latency.
  PlanRequest request = MakeRequest("zb-h1", 4, 8, 1, /*forward=*/3, /*input=*/2, /*weight=*/1,
                                    /*comm=*/0.25);
  const Plan plan = BuildOrDie(request);
  const std::vector<Timeline> steps = {testing::SimulateOrDie(plan)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  ASSERT_EQ(profile->stages.size(), 4u);
  for (const StageProfile& stage : profile->stages) {
    EXPECT_EQ(stage.forward,
              (DurationStats{
                  .samples = 8, .median = 3, .min = 3, .max = 3, .p10 = 3, .p90 = 3, .mean = 3}));
    EXPECT_EQ(stage.backward_input.median, 2);
    EXPECT_EQ(stage.backward_input.samples, 8);
    EXPECT_EQ(stage.backward_weight.median, 1);
    EXPECT_EQ(stage.backward.samples, 0);
  }
  ASSERT_EQ(profile->boundaries.size(), 3u);
  for (const BoundaryProfile& boundary : profile->boundaries) {
    // 8 activations and 8 gradients cross every boundary; each is clean or a late receive.
    EXPECT_EQ(boundary.transfer.samples + boundary.late_receives, 16);
    EXPECT_GT(boundary.transfer.samples, 0);
    EXPECT_EQ(boundary.transfer.min, 0.25);
    EXPECT_EQ(boundary.transfer.max, 0.25);
    // A receive whose data was there takes no time by itself in this model.
    EXPECT_EQ(boundary.receive_overhead.max, 0);
  }
}

// ZBV at P=2 puts stages 1 and 2 on rank 1: that boundary has no transfers and is marked, so
// that Calibrate knows stage 1's backward frees stage 2's gradient.
TEST(BuildProfileTest, ABoundaryInsideARankIsMarkedSameRank) {
  const Plan plan = BuildOrDie(MakeRequest("zbv", 2, 4, 2, 1, 1, 1, 0.25));
  const std::vector<Timeline> steps = {testing::SimulateOrDie(plan)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  ASSERT_EQ(profile->boundaries.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    const BoundaryProfile& boundary = profile->boundaries[b];
    EXPECT_EQ(boundary.same_rank, b == 1) << "boundary " << b;
    EXPECT_EQ(boundary.transfer.samples + boundary.late_receives, b == 1 ? 0 : 8)
        << "boundary " << b;
  }
}

TEST(BuildProfileTest, SimulatedTimelinesGiveBackTheReceiveOverhead) {
  // Every figure a multiple of 0.25, so the times add up exactly.
  PlanRequest request = MakeRequest("zb-h1", 4, 8, 1, /*forward=*/3, /*input=*/2, /*weight=*/1,
                                    /*comm=*/0.25);
  request.costs.boundaries.front().receive_overhead = 0.5;
  const Plan plan = BuildOrDie(request);
  const std::vector<Timeline> steps = {testing::SimulateOrDie(plan)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  int measured = 0;
  for (const BoundaryProfile& boundary : profile->boundaries) {
    if (boundary.receive_overhead.samples == 0) continue;
    ++measured;
    EXPECT_EQ(boundary.receive_overhead.min, 0.5);
    EXPECT_EQ(boundary.receive_overhead.max, 0.5);
    EXPECT_EQ(boundary.transfer.median, 0.25);
  }
  EXPECT_GT(measured, 0);
}

TEST(BuildProfileTest, OverlapCellsCountForTheStageOfTheirForwardHalf) {
  PlanRequest request = MakeRequest("interleaved-1f1b-overlap", 2, 4, 2);
  // Per stage s an overlap cell costs 10 + s, priced (like every cost) on the cell's stage.
  request.costs.stages.clear();
  for (int s = 0; s < 4; ++s) {
    request.costs.stages.push_back({.forward = 1,
                                    .backward = 2,
                                    .backward_input = 1,
                                    .backward_weight = 1,
                                    .overlap = 10.0 + s});
  }
  const Plan plan = BuildOrDie(request);
  std::vector<int> cells_by_forward(4, 0);
  std::vector<int> lone_forwards(4, 0);
  bool halves_differ = false;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (action.kind == ActionKind::kForward) ++lone_forwards[action.stage.value];
      if (action.kind != ActionKind::kOverlapFB) continue;
      ++cells_by_forward[action.sub_actions[0].stage.value];
      halves_differ |= action.sub_actions[0].stage != action.sub_actions[1].stage;
    }
  }
  ASSERT_TRUE(halves_differ) << "the plan cannot tell the forward half's stage from the other";
  const std::vector<Timeline> steps = {testing::SimulateOrDie(plan), testing::SimulateOrDie(plan)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  int cells = 0;
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const StageProfile& stage = profile->stages[s];
    EXPECT_EQ(stage.overlap.samples, 2 * cells_by_forward[s]);
    if (cells_by_forward[s] > 0) {
      EXPECT_EQ(stage.overlap.median, 10.0 + s);
    }
    EXPECT_EQ(stage.forward.samples, 2 * lone_forwards[s]);  // cells are not forwards
    cells += cells_by_forward[s];
  }
  EXPECT_GT(cells, 0);
}

// A host-timed trace says only that a gradient for an F&B cell's backward half landed by the
// cell's end: such receives give no transfer sample there, and every other receive does.
TEST(BuildProfileTest, HostTracesGiveNoSampleForAGradientIntoACellsBackwardHalf) {
  PlanRequest request = MakeRequest("dualpipe-v", 2, 4, 2);
  request.costs.boundaries = {{.latency = 0.5}, {.latency = 0.5}, {.latency = 0.5}};
  const Plan plan = BuildOrDie(request);
  int into_second_halves = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& cell : program.actions) {
      if (cell.kind != ActionKind::kOverlapFB) continue;
      const Action& backward = cell.sub_actions[1];
      into_second_halves += static_cast<int>(
          std::count_if(program.actions.begin(), program.actions.end(), [&](const Action& a) {
            return a.kind == ActionKind::kRecvBackward && a.stage == backward.stage &&
                   a.microbatch == backward.microbatch;
          }));
    }
  }
  ASSERT_GT(into_second_halves, 0) << "no cell's backward half receives its gradient";
  const auto samples = [&](OpClock clock) {
    Timeline step = testing::SimulateOrDie(plan);
    for (RankTimeline& rank : step.ranks) rank.clock = clock;
    const StatusOr<Profile> profile = BuildProfile(plan, std::vector<Timeline>{step}, {});
    EXPECT_TRUE(profile.ok()) << profile.status().message();
    int count = 0;
    for (const BoundaryProfile& b : profile->boundaries)
      count += b.transfer.samples + b.late_receives;
    return count;
  };
  EXPECT_EQ(samples(OpClock::kProfilerHost), samples(OpClock::kHost) - into_second_halves);
  EXPECT_EQ(samples(OpClock::kProfilerDevice), samples(OpClock::kHost));
}

// ---------------------------------------------------------------------------------------------
// Errors: each names the timeline, the rank and the action.

Status ProfileError(const Plan& plan, std::vector<Timeline> steps, ProfileOptions options = {}) {
  return BuildProfile(plan, steps, options).status();
}

TEST(BuildProfileErrorTest, NoStepsOrNoScale) {
  const Plan plan = TinyPlan();
  EXPECT_EQ(ProfileError(plan, {}).message(), "no measured steps to profile");
  EXPECT_EQ(ProfileError(plan, {TinyStep(plan, 1, 1)},
                         {.seconds_per_unit = 0, .source = "", .step_names = {}})
                .message(),
            "seconds per time unit must be a finite number > 0, got 0");
}

TEST(BuildProfileErrorTest, TimelinesThatDoNotFitThePlan) {
  const Plan plan = TinyPlan();
  const Timeline good = TinyStep(plan, 1, 1);

  Timeline one_rank = good;
  one_rank.ranks.pop_back();
  EXPECT_EQ(ProfileError(plan, {good, one_rank}).message(),
            "timeline 1: 1 rank timelines for the plan's 2 ranks");

  Timeline swapped = good;
  std::swap(swapped.ranks[0], swapped.ranks[1]);
  EXPECT_EQ(ProfileError(plan, {swapped}).message(),
            "timeline 0: ranks[0] is rank 1; ranks must be listed in order");

  Timeline short_rank = good;
  short_rank.ranks[1].actions.pop_back();
  EXPECT_EQ(ProfileError(plan, {short_rank}).message(),
            "timeline 0: rank 1: 3 action timings for its 4 actions");
}

TEST(BuildProfileErrorTest, TimesThatRunBackwardsOrAreNotFinite) {
  const Plan plan = TinyPlan();
  Timeline backwards = TinyStep(plan, 1, 1);
  Set(backwards, plan, 1, "1F0", 2, 1.5);
  EXPECT_EQ(ProfileError(plan, {TinyStep(plan, 1, 1), backwards},
                         {.seconds_per_unit = 1, .source = "", .step_names = {"a.pb", "b.pb"}})
                .message(),
            "b.pb: rank 1, action 1 (1F0): ends before it starts (start 2, end 1.5)");

  Timeline infinite = TinyStep(plan, 1, 1);
  Set(infinite, plan, 0, "0SEND_F0", 1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ProfileError(plan, {infinite}).message(),
            "timeline 0: rank 0, action 1 (0SEND_F0): times must be finite, got start 1, end inf");
}

TEST(BuildProfileErrorTest, AReceiveThatEndsBeforeItsSendStarts) {
  const Plan plan = TinyPlan();
  Timeline step = TinyStep(plan, 1, 1);  // the activation's send starts at 1
  Set(step, plan, 1, "1RECV_F0", 0, 0.75);
  EXPECT_EQ(ProfileError(plan, {step}).message(),
            "timeline 0: rank 1, action 0 (1RECV_F0) ends at 0.75, before its send (rank 0, "
            "action 1 (0SEND_F0)) starts at 1; the ranks' times do not share one time zero");
}

TEST(BuildProfileErrorTest, AnInvalidPlanIsRefused) {
  Plan plan = TinyPlan();
  const Timeline step = TinyStep(plan, 1, 1);
  plan.programs[0].actions.pop_back();  // 0B0: stage 0 microbatch 0 has no backward
  const Status status = ProfileError(plan, {step});
  EXPECT_TRUE(status.message().starts_with("the profiled plan is invalid: ")) << status.message();
}

// ---------------------------------------------------------------------------------------------
// ValidateProfile.

Profile ValidProfile() {
  Profile profile;
  profile.steps = 1;
  profile.stages.resize(2);
  profile.stages[0].forward = SummarizeDurations({1, 2, 3});
  profile.boundaries.resize(1);
  return profile;
}

TEST(ValidateProfileTest, AcceptsAProfileBuildProfileWrites) {
  EXPECT_TRUE(ValidateProfile(ValidProfile()).ok());
  const Plan plan = TinyPlan();
  const StatusOr<Profile> built =
      BuildProfile(plan, std::vector<Timeline>{TinyStep(plan, 1, 2)}, {});
  ASSERT_TRUE(built.ok()) << built.status().message();
  EXPECT_TRUE(ValidateProfile(*built).ok());
}

TEST(ValidateProfileTest, NamesTheField) {
  Profile no_stages;
  EXPECT_EQ(ValidateProfile(no_stages).message(), "stages: the profile has no stages");

  Profile boundaries = ValidProfile();
  boundaries.boundaries.resize(2);
  EXPECT_EQ(ValidateProfile(boundaries).message(),
            "boundaries: expected 1 entries (one between each two of the 2 stages), got 2");

  Profile disorder = ValidProfile();
  disorder.stages[1].backward = {.samples = 2, .median = 2, .min = 1, .max = 4, .p10 = 3, .p90 = 3};
  EXPECT_EQ(ValidateProfile(disorder).message(), "stages[1].backward: p10 3 is above median 2");

  Profile negative = ValidProfile();
  negative.boundaries[0].latency = -1;
  EXPECT_EQ(ValidateProfile(negative).message(),
            "boundaries[0].latency: must be a finite number >= 0, got -1");

  Profile figures_without_samples = ValidProfile();
  figures_without_samples.stages[0].overlap.median = 0.5;
  EXPECT_EQ(ValidateProfile(figures_without_samples).message(),
            "stages[0].overlap.median: is 0.5 but samples is 0 (nothing measured)");

  Profile negative_count = ValidProfile();
  negative_count.boundaries[0].late_receives = -3;
  EXPECT_EQ(ValidateProfile(negative_count).message(),
            "boundaries[0].late_receives: must be >= 0, got -3");

  Profile mean_outside = ValidProfile();
  mean_outside.stages[0].forward.mean = 4;
  EXPECT_EQ(ValidateProfile(mean_outside).message(),
            "stages[0].forward.mean: 4 is outside [min 1, max 3]");

  Profile more_overheads_than_late = ValidProfile();
  more_overheads_than_late.boundaries[0].receive_overhead = SummarizeDurations({1, 2});
  more_overheads_than_late.boundaries[0].late_receives = 1;
  EXPECT_EQ(ValidateProfile(more_overheads_than_late).message(),
            "boundaries[0].receive_overhead.samples: 2 is above late_receives 1 (its samples are "
            "late receives)");

  // A profile written before the mean was recorded reads as valid.
  Profile no_mean = ValidProfile();
  no_mean.stages[0].forward.mean = 0;
  EXPECT_TRUE(ValidateProfile(no_mean).ok());
}

// TinyStep with memory counted in bytes: rank 0 holds `static0` when 0F0 begins, F keeps
// `kept` (a transient of 30 above its end), B frees `kept` - 8 (peak 10 above its start); rank 1
// the same from `static1`.
Timeline TinyStepWithBytes(const Plan& plan, double static0, double static1, double kept) {
  Timeline t = TinyStep(plan, 1, 1);
  const double statics[] = {static0, static1};
  for (int r = 0; r < 2; ++r) {
    RankTimeline& rank = t.ranks[r];
    rank.memory_unit = MemoryUnit::kBytes;
    const double base = statics[r];
    rank.action_memory.assign(rank.actions.size(), {base, base, base});
    const std::string stage = std::to_string(r);
    rank.action_memory[IndexOf(plan, r, stage + "F0")] = {base, base + kept, base + kept + 30};
    rank.action_memory[IndexOf(plan, r, stage + "B0")] = {base + kept, base + 8, base + kept + 10};
    rank.peak_memory = base + kept + 30;
    rank.peak_activation_memory = kept + 30;
  }
  return t;
}

TEST(BuildProfileTest, MemoryInBytesPerStageAndKindAndStaticPerRank) {
  const Plan plan = TinyPlan();
  const std::vector<Timeline> steps = {TinyStepWithBytes(plan, 1000, 2000, 100),
                                       TinyStepWithBytes(plan, 1000, 2000, 300),
                                       TinyStepWithBytes(plan, 1200, 2000, 200)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  for (const StageProfile& stage : profile->stages) {
    const StageMemoryProfile& m = stage.memory;
    EXPECT_EQ(m.kept_by_forward.samples, 3);
    EXPECT_EQ(m.kept_by_forward.median, 200);
    EXPECT_EQ(m.kept_by_forward.min, 100);
    EXPECT_EQ(m.kept_by_forward.max, 300);
    EXPECT_EQ(m.freed_by_backward.median, 192);  // kept - 8
    EXPECT_EQ(m.forward_transient.median, 30);
    EXPECT_EQ(m.backward_transient.median, 10);
    EXPECT_EQ(m.freed_by_input, DurationStats{});
    EXPECT_EQ(m.weight_transient, DurationStats{});
  }
  EXPECT_EQ(profile->static_bytes, (std::vector<double>{1000, 2000}));  // medians over steps
  EXPECT_TRUE(ValidateProfile(*profile).ok());
}

// The runtime told what each stage holds of its rank's static memory: per stage the median
// over the steps, per rank the rest.
TEST(BuildProfileTest, WhatEachStageHoldsOfItsRanksStaticMemory) {
  const Plan plan = TinyPlan();
  std::vector<Timeline> steps = {TinyStepWithBytes(plan, 1000, 2000, 100),
                                 TinyStepWithBytes(plan, 1000, 2000, 100)};
  steps[0].ranks[0].stage_static = {{.stage = StageId(0), .bytes = 900, .input_bytes = 300}};
  steps[0].ranks[1].stage_static = {{.stage = StageId(1), .bytes = 1500, .target_bytes = 200}};
  steps[1].ranks[0].stage_static = {{.stage = StageId(0), .bytes = 900, .input_bytes = 300}};
  steps[1].ranks[1].stage_static = {{.stage = StageId(1), .bytes = 1700, .target_bytes = 200}};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->stages[0].memory.static_bytes, 900);
  EXPECT_EQ(profile->stages[1].memory.static_bytes, 1600);
  EXPECT_EQ(profile->stages[0].memory.input_bytes, 300);
  EXPECT_EQ(profile->stages[0].memory.target_bytes, 0);
  EXPECT_EQ(profile->stages[1].memory.input_bytes, 0);
  EXPECT_EQ(profile->stages[1].memory.target_bytes, 200);
  EXPECT_EQ(profile->stages[0].memory.microbatches, 1);  // the data are for TinyPlan's M = 1
  EXPECT_EQ(profile->static_bytes, (std::vector<double>{1000, 2000}));
  EXPECT_EQ(profile->own_static_bytes, (std::vector<double>{100, 400}));
  EXPECT_TRUE(ValidateProfile(*profile).ok());

  steps[1].ranks[1].stage_static = {{.stage = StageId(0), .bytes = 1700}};
  const StatusOr<Profile> wrong = BuildProfile(plan, steps, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(
                "rank 1: stage_static names stage 0, which the plan does not place on this rank"),
            std::string::npos)
      << wrong.status().message();
}

TEST(BuildProfileTest, OwnStaticBytesAboveTheRanksStaticAreRefused) {
  const Plan plan = TinyPlan();
  const std::vector<Timeline> steps = {TinyStepWithBytes(plan, 1000, 2000, 100)};
  StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  profile->own_static_bytes = {100, 2500};
  const Status status = ValidateProfile(*profile);
  EXPECT_EQ(status.message(),
            "own_static_bytes[1]: 2500 is above the rank's static_bytes 2000 (it is a part of "
            "them)");
  profile->own_static_bytes = {100};
  EXPECT_EQ(ValidateProfile(*profile).message(),
            "own_static_bytes: 1 entries for 2 ranks in static_bytes");
  profile->own_static_bytes = {};
  profile->stages[1].memory.static_bytes = 50;
  profile->stages[1].memory.input_bytes = 40;
  profile->stages[1].memory.target_bytes = 20;
  profile->stages[1].memory.microbatches = 1;
  EXPECT_EQ(ValidateProfile(*profile).message(),
            "stages[1].memory.input_bytes + stages[1].memory.target_bytes: 60 are above "
            "static_bytes 50 (the data are a part of them)");
  profile->stages[1].memory.target_bytes = -1;
  EXPECT_EQ(ValidateProfile(*profile).message(),
            "stages[1].memory.target_bytes: must be a finite number >= 0, got -1");
  profile->stages[1].memory.static_bytes = -1;
  EXPECT_NE(ValidateProfile(*profile).message().find("stages[1].memory.static_bytes"),
            std::string::npos);
}

// A receive's memory is the message buffer it allocated: rank 1's RECV_F allocates 64, rank
// 0's RECV_B 32 (stage 0 receives no input, stage 1 no gradient).
TEST(BuildProfileTest, WhatAReceiveAllocatesPerStage) {
  const Plan plan = TinyPlan();
  Timeline step = TinyStepWithBytes(plan, 1000, 2000, 100);
  step.ranks[1].action_memory[IndexOf(plan, 1, "1RECV_F0")] = {2000, 2064, 2064};
  step.ranks[0].action_memory[IndexOf(plan, 0, "0RECV_B0")] = {1008, 1040, 1040};
  const std::vector<Timeline> steps = {step};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->stages[0].memory.received_forward, DurationStats{});
  EXPECT_EQ(profile->stages[0].memory.received_backward.median, 32);
  EXPECT_EQ(profile->stages[1].memory.received_forward.median, 64);
  EXPECT_EQ(profile->stages[1].memory.received_backward, DurationStats{});
  EXPECT_TRUE(ValidateProfile(*profile).ok());
}

TEST(BuildProfileTest, TimelinesWithoutBytesGiveNoMemory) {
  const Plan plan = TinyPlan();
  const std::vector<Timeline> steps = {TinyStep(plan, 1, 3)};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  for (const StageProfile& stage : profile->stages) EXPECT_EQ(stage.memory, StageMemoryProfile{});
  EXPECT_TRUE(profile->static_bytes.empty());
}

TEST(BuildProfileTest, AMemoryPeakBelowItsActionsEndIsAnErrorNamingTheAction) {
  const Plan plan = TinyPlan();
  Timeline step = TinyStepWithBytes(plan, 1000, 2000, 100);
  step.ranks[1].action_memory[IndexOf(plan, 1, "1F0")].peak = 1500;  // below its end, 2100
  const std::vector<Timeline> steps = {step};
  const StatusOr<Profile> profile = BuildProfile(plan, steps, {});
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("rank 1"), std::string::npos)
      << profile.status().message();
  EXPECT_NE(profile.status().message().find("1F0"), std::string::npos)
      << profile.status().message();
  EXPECT_NE(profile.status().message().find("peak 1500"), std::string::npos)
      << profile.status().message();
}

}  // namespace
}  // namespace pipeplan
