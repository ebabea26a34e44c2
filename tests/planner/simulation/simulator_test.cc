// Simulator semantics (docs/planning.md §4) on cases small enough to work out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::SimulateOrDie;

// Index of the first action with this token on a rank.
size_t Find(const Plan& plan, int rank, const std::string& token) {
  const auto& actions = plan.programs[rank].actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (ToString(actions[i]) == token) return i;
  }
  ADD_FAILURE() << token << " not on rank " << rank;
  return 0;
}

// The request is refused with a message that says `named`.
void ExpectRefused(const PlanRequest& request, const std::string& named) {
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(named), std::string::npos) << plan.status().message();
}

TEST(Simulator, CommLatencyDelaysTheConsumerOnly) {
  // 1F1B P=2 M=1, F=1, B=2 (I=W=1), latency 0.5: F0 [0,1]; 1F0 [1.5,2.5]; 1B0 [2.5,4.5];
  // 0B0 [5,7].
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 1, 1, 1, 1, 1, 0.5));
  const Timeline t = SimulateOrDie(plan);
  const auto timing = [&](int rank, const std::string& token) {
    return t.ranks[rank].actions[Find(plan, rank, token)];
  };
  EXPECT_EQ(timing(0, "0F0"), (ActionTiming{0, 1}));
  EXPECT_EQ(timing(0, "0SEND_F0"), (ActionTiming{1, 1.5, kCommThread}));
  EXPECT_EQ(timing(1, "1RECV_F0"), (ActionTiming{0, 1.5, kCommThread}));
  EXPECT_EQ(timing(1, "1F0"), (ActionTiming{1.5, 2.5}));
  EXPECT_EQ(timing(1, "1B0"), (ActionTiming{2.5, 4.5}));
  EXPECT_EQ(timing(0, "0B0"), (ActionTiming{5, 7}));
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 7);
  EXPECT_DOUBLE_EQ(t.ranks[1].busy, 3);
  EXPECT_DOUBLE_EQ(t.metrics.bubble_fraction_max, 1 - 3.0 / 7);
  EXPECT_DOUBLE_EQ(t.metrics.bubble_fraction_mean, ((1 - 3.0 / 7) + (1 - 3.0 / 7)) / 2);
  // Rank 0 spans 0..7 with 3 busy: (7 - 3) / 7.
  EXPECT_DOUBLE_EQ(t.metrics.zb_bubble_rate, 4.0 / 7);
  // One microbatch's critical path: 1 + 0.5 + 1 + 2 + 0.5 + 2 = 7.
  EXPECT_DOUBLE_EQ(t.metrics.lower_bound, 7);
  EXPECT_DOUBLE_EQ(t.metrics.gap_to_lower_bound, 0);
}

TEST(Simulator, ReceiveOverheadCountsFromThePostUnlessTheDataIsLater) {
  // The same plan with a receive overhead of 3: 1RECV_F0, posted at 0, ends at max(0 + 3,
  // 1.5) = 3, so 1F0 [3,4] and 1B0 [4,6]; 0RECV_B0, posted at 1, ends when the gradient lands
  // at 6.5 (1 + 3 is earlier): 0B0 [6.5,8.5].
  PlanRequest request = MakeRequest("1f1b", 2, 1, 1, 1, 1, 1, 0.5);
  request.costs.boundaries.front().receive_overhead = 3;
  const Plan plan = BuildOrDie(request);
  const Timeline t = SimulateOrDie(plan);
  const auto timing = [&](int rank, const std::string& token) {
    return t.ranks[rank].actions[Find(plan, rank, token)];
  };
  EXPECT_EQ(timing(1, "1RECV_F0"), (ActionTiming{0, 3, kCommThread}));
  EXPECT_EQ(timing(1, "1F0"), (ActionTiming{3, 4}));
  EXPECT_EQ(timing(1, "1B0"), (ActionTiming{4, 6}));
  EXPECT_EQ(timing(0, "0RECV_B0"), (ActionTiming{1, 6.5, kCommThread}));
  EXPECT_EQ(timing(0, "0B0"), (ActionTiming{6.5, 8.5}));
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 8.5);
  // The lower bound leaves the overhead out: a receive posted early enough hides it.
  EXPECT_DOUBLE_EQ(t.metrics.lower_bound, 7);

  // An overhead of 1 is hidden by both transfers (each lands more than 1 after its post).
  request.costs.boundaries.front().receive_overhead = 1;
  EXPECT_DOUBLE_EQ(SimulateOrDie(BuildOrDie(request)).metrics.makespan, 7);
}

TEST(Simulator, MemoryCurveFollowsForwardsAndBackwards) {
  // GPipe P=1 M=3: activations 1, 2, 3 then back to 0; static 10 added on top.
  PlanRequest request = MakeRequest("gpipe", 1, 3);
  request.memory.static_per_rank = 10;
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 3);
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_memory, 13);
  EXPECT_DOUBLE_EQ(t.ranks[0].memory.front().bytes, 10);
  EXPECT_DOUBLE_EQ(t.ranks[0].memory.back().bytes, 10);
}

// A memory model in bytes (as calibrate writes one): the closed forms of the papers, static
// memory plus P activations on rank 0 for 1F1B and 2P - 1 for ZB-H2.
TEST(Simulator, PeaksInBytesFollowTheClosedForms) {
  constexpr double kStatic = 12e9;
  constexpr double kActivation = 1.5e9;
  constexpr int kRanks = 4;
  for (const auto& [strategy, held] :
       {std::pair<const char*, int>{"1f1b", kRanks}, {"zb-h2", 2 * kRanks - 1}}) {
    SCOPED_TRACE(strategy);
    PlanRequest request = MakeRequest(strategy, kRanks, 2 * kRanks);
    request.memory.unit = MemoryUnit::kBytes;
    request.memory.static_per_rank = kStatic;
    request.memory.stages = {StageMemory{.activation = kActivation, .freed_by_input = 0}};
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    EXPECT_DOUBLE_EQ(t.ranks[0].peak_memory, kStatic + held * kActivation);
    EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, held * kActivation);
  }
}

// 1F1B P=4 in bytes with one kind's transient: rank 0's peak (P activations held) moves by
// exactly that transient, held inside the P-th F or the first B.
TEST(Simulator, ATransientMovesThePeakByExactlyItsSize) {
  constexpr double kStatic = 12e9;
  constexpr double kActivation = 1.5e9;
  constexpr int kRanks = 4;
  const auto peak_with = [&](StageMemory stage) {
    PlanRequest request = MakeRequest("1f1b", kRanks, 2 * kRanks);
    request.memory.unit = MemoryUnit::kBytes;
    request.memory.static_per_rank = kStatic;
    stage.activation = kActivation;
    request.memory.stages = {stage};
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    return t.ranks[0].peak_memory;
  };
  const double base = kStatic + kRanks * kActivation;
  EXPECT_DOUBLE_EQ(peak_with({}), base);
  EXPECT_DOUBLE_EQ(peak_with({.forward_transient = 0.25e9}), base + 0.25e9);
  EXPECT_DOUBLE_EQ(peak_with({.backward_transient = 2e9}), base + 2e9);
  // Both: the larger one, as the two never run at once.
  EXPECT_DOUBLE_EQ(peak_with({.forward_transient = 0.25e9, .backward_transient = 2e9}), base + 2e9);
}

TEST(Simulator, TheCurveShowsATransientInsideItsAction) {
  // ZB-H1 P=1 M=1: F0 I0 W0; I holds 0.5 while it runs.
  PlanRequest request = MakeRequest("zb-h1", 1, 1);
  request.memory.stages = {StageMemory{.activation = 1.0, .input_transient = 0.5}};
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 1.5);
  double most = 0.0;
  for (const MemorySample& sample : t.ranks[0].memory) most = std::max(most, sample.bytes);
  EXPECT_DOUBLE_EQ(most, 1.5);
}

// A stage's static bytes go with it: 1F1B puts the first stage on rank 0 and the last on rank
// 3, a V shape both on rank 0, with two stages (each half a share) on every rank.
TEST(Simulator, StaticMemoryOfAStageIsCountedWhereThePlanPutsIt) {
  MemoryModel share;
  share.stages = {StageMemory{.activation = 1.0, .static_bytes = 100}};
  share.static_per_rank = 1;
  share.first_stage_static = 30;
  share.last_stage_static = 50;
  const auto statics = [&](const char* strategy, int v) {
    PlanRequest request = MakeRequest(strategy, 4, 8);
    request.topology.stages_per_rank = v;
    if (v == 2) request.topology.placement = Placement::kVShape;
    request.memory = SplitShareMemory(share, v);
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    std::vector<double> out;
    for (const RankTimeline& rank : t.ranks) {
      out.push_back(rank.peak_memory - rank.peak_activation_memory);
    }
    EXPECT_DOUBLE_EQ(request.memory.LargestFixed(StageMap(request.topology), 0),
                     *std::max_element(out.begin(), out.end()));
    return out;
  };
  EXPECT_EQ(statics("1f1b", 1), (std::vector<double>{131, 101, 101, 151}));
  EXPECT_EQ(statics("zbv", 2), (std::vector<double>{181, 101, 101, 101}));
}

TEST(Simulator, StaticMemoryPerRankWhereRanksDiffer) {
  // 1F1B P=4: rank r holds P - r activations at its peak, on its own static memory.
  constexpr int kRanks = 4;
  PlanRequest request = MakeRequest("1f1b", kRanks, 2 * kRanks);
  request.memory.stages = {StageMemory{.activation = 1.0}};
  request.memory.static_per_rank = 40;
  request.memory.static_by_rank = {40, 10, 20, 30};
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_DOUBLE_EQ(t.ranks[r].peak_memory, request.memory.static_by_rank[r] + (kRanks - r))
        << "rank " << r;
  }
  request.memory.static_by_rank = {40, 10};
  ExpectRefused(request,
                "memory.static_by_rank has 2 entries (one per rank of the profiled run) but the "
                "plan has 4 ranks");
}

TEST(Simulator, RetainedBytesStayUntilTheStepEnds) {
  // ZB-H1 P=1 M=2: F0 I0 W0 F1 I1 W1; each microbatch keeps 0.25 of its 1 after its W.
  PlanRequest request = MakeRequest("zb-h1", 1, 2);
  request.memory.stages = {StageMemory{.activation = 1.0, .retained = 0.25}};
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 1.25);
  EXPECT_DOUBLE_EQ(t.ranks[0].memory.back().bytes, 0.5);
}

// What a backward leaves (its input gradient) is handed over in memory where the previous
// stage is on the same rank, and that stage's backward frees it. ZBV P=1 M=1: F0 F1 I1 I0 W1
// W0 on one rank.
TEST(Simulator, AGradientHandedToTheSameRankIsFreedByThePreviousStagesBackward) {
  PlanRequest one_rank = MakeRequest("zbv", 1, 1, 2);
  one_rank.memory.stages = {StageMemory{.activation = 1.0, .retained = 0.25}};
  const Timeline t = SimulateOrDie(BuildOrDie(one_rank));
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 2.0);
  // Stage 0's I frees stage 1's 0.25 (and stage 0's own 0.25 has no stage to go to: kept).
  EXPECT_DOUBLE_EQ(t.ranks[0].memory.back().bytes, 0.25);
}

// A gradient sent to another rank is freed at its rank's first op that starts once it landed
// there (the runtime frees a buffer whose send completed). 1F1B P=2 M=2, F=1, B=2: rank 1 runs
// F0 [1,2] B0 [2,4] F1 B1; its gradient of mb 0 lands on rank 0 at 4 + the transfer time.
TEST(Simulator, ASentGradientIsFreedOnceItLanded) {
  for (const double transfer : {0.0, 0.5}) {
    SCOPED_TRACE("transfer " + std::to_string(transfer));
    PlanRequest request = MakeRequest("1f1b", 2, 2, 1, 1, 1, 1, transfer);
    request.memory.stages = {StageMemory{.activation = 1.0, .retained = 0.25}};
    const Timeline t = SimulateOrDie(BuildOrDie(request));
    ASSERT_EQ(t.ranks.size(), 2u);
    // Without a transfer F1 starts at 4, when the gradient landed: freed, F1 holds 1. With 0.5
    // F1 starts at 4.5 (after B0, its input came at 2.5) and the gradient lands at 5: F1 holds
    // it and its own activation, 1.25; B1 (from 5.5) then starts without it.
    EXPECT_DOUBLE_EQ(t.ranks[1].peak_activation_memory, transfer == 0.0 ? 1.0 : 1.25);
    // B1's gradient has no op after it: held to the step's end.
    EXPECT_DOUBLE_EQ(t.ranks[1].memory.back().bytes, 0.25);
  }
}

// Torch's runtime clears its stages' state only when the step ends: a sent gradient is held to
// there. 1F1B P=2 M=4, rank 1 runs F0 B0 F1 B1 F2 B2 F3 B3: F3 starts on three microbatches'
// 0.25 and takes its own 1. Where the job frees the gradients between steps (set_to_none), B0
// allocates them (0.5) and they stay.
TEST(Simulator, TorchsRuntimeHoldsWhatABackwardLeavesToTheStepsEnd) {
  const auto peak_of_last_rank = [](Runtime runtime, double gradient) {
    PlanRequest request = MakeRequest("1f1b", 2, 4);
    request.runtime = runtime;
    request.memory.stages = {
        StageMemory{.activation = 1.0, .retained = 0.25, .gradient = gradient}};
    return SimulateOrDie(BuildOrDie(request)).ranks[1];
  };
  const RankTimeline torch = peak_of_last_rank(Runtime::kTorch, 0.0);
  EXPECT_DOUBLE_EQ(torch.peak_activation_memory, 1.75);
  EXPECT_DOUBLE_EQ(torch.memory.back().bytes, 1.0);
  EXPECT_DOUBLE_EQ(peak_of_last_rank(Runtime::kTorchtitan, 0.0).peak_activation_memory, 1.75);
  // pipeplan's own runtime frees each once it landed (without a transfer: at once).
  EXPECT_DOUBLE_EQ(peak_of_last_rank(Runtime::kAny, 0.0).peak_activation_memory, 1.0);
  const RankTimeline with_gradients = peak_of_last_rank(Runtime::kTorch, 0.5);
  EXPECT_DOUBLE_EQ(with_gradients.peak_activation_memory, 2.25);
  EXPECT_DOUBLE_EQ(with_gradients.memory.back().bytes, 1.5);
}

// An I that allocates (what torch's split backward keeps for W) holds it until its W, which
// frees it with the rest; a split that keeps more than B (split_retained_extra) leaves that.
// ZB-H1 P=1 M=2: F0 I0 W0 F1 I1 W1.
TEST(Simulator, WhatIAllocatesIsHeldUntilWAndTheSplitsExtraToTheEnd) {
  PlanRequest request = MakeRequest("zb-h1", 1, 2);
  request.memory.stages = {StageMemory{.activation = 1.0,
                                       .retained = 0.25,
                                       .allocated_by_input = 0.5,
                                       .split_retained_extra = 0.125}};
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  const RankTimeline& rank = t.ranks[0];
  // F1 starts on mb 0's 0.375 and I1 takes it to 0.375 + 1 + 0.5.
  EXPECT_DOUBLE_EQ(rank.peak_activation_memory, 1.875);
  EXPECT_DOUBLE_EQ(rank.memory.back().bytes, 0.75);
  EXPECT_DOUBLE_EQ(request.memory.Change(ActionKind::kBackwardInput, StageId(0), 1), 0.5);
  EXPECT_DOUBLE_EQ(request.memory.Change(ActionKind::kBackwardWeight, StageId(0), 1), -1.125);
}

// A receive's message is held from where the rank posts it. ZB-H2 P=2 M=4, rank 1: RECV_F0
// F0 I0 RECV_F1 RECV_F2 SEND_B0 F1 I1 SEND_B1 F2 I2 RECV_F3 SEND_B2 W0 F3 ...: the message of
// mb 2 waits through F1 and I1, that of mb 3 through W0. With activation 1 (its received input
// 0.25 of it) and W freeing it all, W0 starts holding three activations and mb 3's message.
TEST(Simulator, AReceivePostedAheadOfItsConsumerHoldsItsMessageFromThere) {
  for (const double message : {0.0, 0.25}) {
    SCOPED_TRACE("received input " + std::to_string(message));
    PlanRequest request = MakeRequest("zb-h2", 2, 4);
    request.memory.stages = {StageMemory{.activation = 1.0, .received_input = message}};
    const Plan plan = BuildOrDie(request);
    ASSERT_LT(Find(plan, 1, "1RECV_F3"), Find(plan, 1, "1W0"));
    const Timeline t = SimulateOrDie(plan);
    EXPECT_DOUBLE_EQ(t.ranks[1].peak_activation_memory, 3.0 + message);
  }
}

// The same for a received gradient, which the backward that reads it counts in its transient
// from its start. ZBV P=2 M=4, rank 1: ... RECV_B2.1 SEND_B1.0 W1.0 F2.2 RECV_F1.3 SEND_F2.2
// I2.1 ...: W1.0 starts holding what it would without the message, and the message.
TEST(Simulator, AGradientReceivedAheadOfItsBackwardIsHeldFromItsReceive) {
  // The curve's last sample at an action's start is the one taken as it started.
  const auto held_at_start = [](const Timeline& t, size_t index) {
    const double start = t.ranks[1].actions[index].start;
    double held = -1.0;
    for (const MemorySample& sample : t.ranks[1].memory) {
      if (sample.time == start) held = sample.bytes;
    }
    return held;
  };
  PlanRequest request = MakeRequest("zbv", 2, 4, 2);
  request.memory.stages = {StageMemory{.activation = 1.0, .input_transient = 0.5}};
  const Plan plan = BuildOrDie(request);
  const size_t weight = Find(plan, 1, "1W0");
  ASSERT_LT(Find(plan, 1, "2RECV_B1"), weight);
  ASSERT_GT(Find(plan, 1, "2I1"), weight);
  const Timeline without = SimulateOrDie(plan);
  request.memory.stages[0].received_gradient = 0.5;
  const Timeline with = SimulateOrDie(BuildOrDie(request));
  EXPECT_DOUBLE_EQ(held_at_start(with, weight), held_at_start(without, weight) + 0.5);
  // I2.1 counts it in its transient: its peak is the same either way.
  const size_t input = Find(plan, 1, "2I1");
  EXPECT_DOUBLE_EQ(held_at_start(with, input), held_at_start(without, input));
}

TEST(Simulator, AReceivedGradientAboveTheBackwardsTransientIsRefused) {
  PlanRequest request = MakeRequest("zbv", 2, 4, 2);
  request.memory.stages = {
      StageMemory{.activation = 1.0, .input_transient = 0.5, .received_gradient = 0.75}};
  ExpectRefused(request,
                "memory.stages[0].received_gradient: 0.75 is above the backward's transient (0.5)");
}

TEST(Simulator, ABadMemoryFigureIsRefusedNamingIt) {
  PlanRequest request = MakeRequest("1f1b", 2, 4);
  request.memory.stages = {StageMemory{.activation = 1.0, .weight_transient = -1}};
  ExpectRefused(request, "memory.stages[0].weight_transient must be a finite number >= 0");
}

TEST(Simulator, InputBackwardFreesItsShareAndWeightTheRest) {
  // ZB-H1 P=1 M=2 has no warm-up: F0 I0 W0 F1 I1 W1. With I freeing 0.25 of 1 the peak is 1.
  PlanRequest request = MakeRequest("zb-h1", 1, 2);
  request.memory.stages = {StageMemory{1.0, 0.25}};
  const Timeline t = SimulateOrDie(BuildOrDie(request));
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 1);
  // Samples: start 0, F0 start 1, F0 end 1, I0 start 1, I0 end 0.75, W0 start .75, W0 end 0.
  ASSERT_GE(t.ranks[0].memory.size(), 7u);
  EXPECT_DOUBLE_EQ(t.ranks[0].memory[4].bytes, 0.75);
  EXPECT_DOUBLE_EQ(t.ranks[0].memory[6].bytes, 0);
}

TEST(Simulator, DefaultActivationIsOneOverVPerStage) {
  // Interleaved P=2 V=2 M=4 (orders in strategy_order_test): rank 0 holds at most 5 chunk
  // activations (0F0 0F1 2F0 2F1 0F2), rank 1 at most 3; each chunk is 1/2.
  const Timeline t = SimulateOrDie(BuildOrDie(MakeRequest("interleaved-1f1b", 2, 4, 2)));
  EXPECT_DOUBLE_EQ(t.ranks[0].peak_activation_memory, 2.5);
  EXPECT_DOUBLE_EQ(t.ranks[1].peak_activation_memory, 1.5);
}

TEST(Simulator, SameInputGivesIdenticalTimelines) {
  const Plan plan = BuildOrDie(MakeRequest("interleaved-1f1b", 4, 8, 2, 1, 1, 1, 0.1));
  EXPECT_EQ(SimulateOrDie(plan), SimulateOrDie(plan));
}

TEST(Simulator, OtherCostsChangeTimesNotOrder) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 4, 8));
  CostModel slower;
  slower.stages = {StageCosts{2, 4, 2, 2, 0}};
  const StatusOr<Timeline> t = Simulate(plan, slower, plan.request.memory);
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->metrics.makespan, 66);
}

TEST(Simulator, RejectsAnInvalidPlanInsteadOfCrashing) {
  Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2));
  plan.programs[1].actions[1].stage = StageId(99);
  const StatusOr<Timeline> t = Simulate(plan);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(
      t.status().message(),
      "rank 1, action 1 (99F0): stage or microbatch out of range (run the validator: pipeplan "
      "validates plans before simulating them)");
}

}  // namespace
}  // namespace pipeplan
