#include "pipeplan/model/action.h"

#include <gtest/gtest.h>

#include "pipeplan/model/topology.h"

namespace pipeplan {
namespace {

TEST(Action, TokensFollowTorchGrammar) {
  Action send = MakeCompute(ActionKind::kSendForward, StageId(2), MicrobatchId(1));
  EXPECT_EQ(ToString(MakeCompute(ActionKind::kBackward, StageId(3), MicrobatchId(5))), "3B5");
  EXPECT_EQ(ToString(send), "2SEND_F1");
  const Action overlap =
      MakeOverlap(MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(1)),
                  MakeCompute(ActionKind::kBackward, StageId(1), MicrobatchId(0)));
  EXPECT_EQ(ToString(overlap), "(0F1;1B0)OVERLAP_F_B");
  EXPECT_EQ(ToString(MakeCompute(ActionKind::kPostValidation, StageId(4), MicrobatchId(0))), "4PV");
}

TEST(Action, EveryKindRoundTripsThroughItsToken) {
  for (int k = 0; k <= static_cast<int>(ActionKind::kRecvPostValidation); ++k) {
    const auto kind = static_cast<ActionKind>(k);
    EXPECT_EQ(KindFromToken(KindToken(kind)), kind);
    EXPECT_NE(IsCompute(kind), IsComm(kind) || kind == ActionKind::kPostValidation);
  }
  EXPECT_FALSE(KindFromToken("BW").has_value());
}

TEST(Topology, LoopAndVPlacements) {
  const StageMap loop(Topology{4, 2, 8, Placement::kLoop});
  EXPECT_EQ(loop.RankOf(StageId(5)), RankId(1));
  EXPECT_EQ(loop.StagesOf(RankId(1)), (std::vector<StageId>{StageId(1), StageId(5)}));
  const StageMap v(Topology{4, 2, 8, Placement::kVShape});
  EXPECT_EQ(v.StagesOf(RankId(0)), (std::vector<StageId>{StageId(0), StageId(7)}));
  EXPECT_EQ(v.StagesOf(RankId(3)), (std::vector<StageId>{StageId(3), StageId(4)}));
  EXPECT_EQ(v.ChunkOf(StageId(4)), 1);
  EXPECT_EQ(v.DepthOf(StageId(7)), 7);
  EXPECT_EQ(v.BatchMicrobatchOf(StageId(7), MicrobatchId(3)), 3);
}

// Copy B of dual placement runs the model's stages again, on the other half of the batch.
TEST(Topology, DualPlacementsSecondCopy) {
  const StageMap dual(Topology{4, 2, 8, Placement::kDual});
  EXPECT_EQ(dual.StagesOf(RankId(0)), (std::vector<StageId>{StageId(0), StageId(7)}));
  EXPECT_EQ(dual.chains(), 2);
  EXPECT_EQ(dual.ChainOf(StageId(3)), 0);
  EXPECT_EQ(dual.ChainOf(StageId(4)), 1);
  EXPECT_EQ(dual.DepthOf(StageId(3)), 3);
  EXPECT_EQ(dual.DepthOf(StageId(4)), 0);  // copy B's first stage, on rank 3
  EXPECT_EQ(dual.DepthOf(StageId(7)), 3);  // copy B's last stage, on rank 0
  EXPECT_EQ(dual.MicrobatchesOf(StageId(7)), 4);
  EXPECT_EQ(dual.BatchMicrobatchOf(StageId(2), MicrobatchId(3)), 3);
  EXPECT_EQ(dual.BatchMicrobatchOf(StageId(5), MicrobatchId(3)), 7);
}

}  // namespace
}  // namespace pipeplan
