// How a memory model's figures follow a stage's depth (SplitShareMemory, ShareOfStageMemory)
// and where static memory lands (StaticOf).
#include "pipeplan/model/memory_model.h"

#include <gtest/gtest.h>

namespace pipeplan {
namespace {

// A share of 1000 activation bytes, 100 of them its received input: split over two stages,
// each holds half of the rest and an input of its own; joined back, one input again. A
// received gradient, one message per stage too, stays as it is.
TEST(MemoryModelTest, EveryStageReceivesOneInputHoweverDeep) {
  MemoryModel share;
  share.stages = {StageMemory{.activation = 1000,
                              .freed_by_input = 300,
                              .input_transient = 100,
                              .retained = 100,
                              .static_bytes = 4000,
                              .received_input = 100,
                              .received_gradient = 100}};
  const MemoryModel half = SplitShareMemory(share, 2);
  EXPECT_EQ(half.stages[0], (StageMemory{.activation = 550,
                                         .freed_by_input = 150,
                                         .input_transient = 100,
                                         .retained = 100,
                                         .static_bytes = 2000,
                                         .received_input = 100,
                                         .received_gradient = 100}));
  EXPECT_EQ(ShareOfStageMemory(half, 2), share);
  EXPECT_EQ(SplitShareMemory(share, 1), share);
}

// Dual placement: each copy's first and last stage bring their extras to their ranks.
TEST(MemoryModelTest, StaticMemoryOfEachCopysEndsUnderDualPlacement) {
  MemoryModel memory;
  memory.stages = {StageMemory{.static_bytes = 10}};
  memory.static_per_rank = 1;
  memory.first_stage_static = 100;
  memory.last_stage_static = 1000;
  const StageMap map(
      Topology{.ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kDual});
  // Rank 0: stage 0 (first of copy A) and 7 (last of copy B); rank 3: stages 3 and 4.
  EXPECT_EQ(memory.StaticOf(RankId(0), map), 1 + 20 + 100 + 1000);
  EXPECT_EQ(memory.StaticOf(RankId(1), map), 1 + 20);
  EXPECT_EQ(memory.StaticOf(RankId(3), map), 1 + 20 + 100 + 1000);
  EXPECT_EQ(memory.LargestFixed(map, 0), 1121);

  // The data go with the microbatches of each end: each copy runs M / 2 = 4.
  memory.first_stage_data_per_microbatch = 3;
  memory.last_stage_data_per_microbatch = 5;
  EXPECT_EQ(memory.StaticOf(RankId(0), map), 1 + 20 + 100 + 1000 + 4 * 3 + 4 * 5);
  EXPECT_EQ(memory.StaticOf(RankId(1), map), 1 + 20);
}

// LargestFixed is every rank's own fixed memory only where nothing differs between ranks or
// comes and goes: the default model. A transient, a retained gradient or one rank's larger
// static memory (a chain's first stage with its extra) each make it a bound.
TEST(MemoryModelTest, LargestFixedIsEveryRanksOnlyWithoutTransientsRetainedOrUnequalStatic) {
  const StageMap map(Topology{.ranks = 4, .stages_per_rank = 1, .microbatches = 8});
  MemoryModel memory;
  memory.static_per_rank = 5;
  EXPECT_TRUE(memory.LargestFixedIsEveryRanks(map));
  EXPECT_STREQ(memory.FixedName(), "static");
  for (double StageMemory::*figure :
       {&StageMemory::forward_transient, &StageMemory::backward_transient,
        &StageMemory::input_transient, &StageMemory::weight_transient, &StageMemory::retained}) {
    MemoryModel with = memory;
    with.stages.front().*figure = 0.5;
    EXPECT_FALSE(with.LargestFixedIsEveryRanks(map));
    EXPECT_STREQ(with.FixedName(), "static + transient + retained");
  }
  memory.first_stage_static = 2;
  EXPECT_FALSE(memory.LargestFixedIsEveryRanks(map));
  EXPECT_STREQ(memory.FixedName(), "static");
}

// The data a chain's ends hold follow the plan's microbatches: a model calibrated at M = 8
// predicts M = 32.
TEST(MemoryModelTest, TheDataFollowThePlansMicrobatches) {
  MemoryModel memory;
  memory.stages = {StageMemory{.static_bytes = 10}};
  memory.first_stage_data_per_microbatch = 3;
  memory.last_stage_data_per_microbatch = 5;
  for (const int microbatches : {8, 32}) {
    const StageMap map(Topology{.ranks = 2, .stages_per_rank = 1, .microbatches = microbatches});
    EXPECT_EQ(memory.StaticOf(RankId(0), map), 10 + 3.0 * microbatches);
    EXPECT_EQ(memory.StaticOf(RankId(1), map), 10 + 5.0 * microbatches);
  }
  memory.last_stage_data_per_microbatch = -1;
  EXPECT_EQ(ValidateMemoryModel(memory, 1).message(),
            "memory.last_stage_data_per_microbatch must be a finite number >= 0, got -1.000000");
}

// What a receive allocates: RECV_F its stage's received input (at most the activation),
// RECV_B its received gradient; nothing for other kinds.
TEST(MemoryModelTest, AReceivesMessageIsItsStagesReceivedInputOrGradient) {
  MemoryModel memory;
  memory.stages = {StageMemory{.activation = 50, .received_input = 80, .received_gradient = 30}};
  EXPECT_EQ(memory.ReceivedMessage(ActionKind::kRecvForward, StageId(0), 1), 50);
  EXPECT_EQ(memory.ReceivedMessage(ActionKind::kRecvBackward, StageId(0), 1), 30);
  EXPECT_EQ(memory.ReceivedMessage(ActionKind::kForward, StageId(0), 1), 0);
  EXPECT_EQ(memory.ReceivedMessage(ActionKind::kSendBackward, StageId(0), 1), 0);
}

}  // namespace
}  // namespace pipeplan
