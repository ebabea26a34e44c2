// Per-stage figures cut again for another number of stages (stage_recut.h): by depth, with
// what each kind of figure means kept (durations and activations add up, workspaces do not,
// messages are the model's).
#include "pipeplan/model/stage_recut.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace pipeplan {
namespace {

StageCosts Costs(double f, double b, double i, double w, double overlap = 0) {
  return StageCosts{
      .forward = f, .backward = b, .backward_input = i, .backward_weight = w, .overlap = overlap};
}

BoundaryCosts Latency(double latency) { return BoundaryCosts{.latency = latency}; }

StageFigures Fit(const CostModel& costs, const MemoryModel& memory, const Topology& topology) {
  StatusOr<StageFigures> fitted = FitStageFigures(costs, memory, topology);
  EXPECT_TRUE(fitted.ok()) << fitted.status().message();
  return fitted.ok() ? *std::move(fitted) : StageFigures{};
}

TEST(StageRecutTest, DurationsFollowTheDepthEachStageCovers) {
  CostModel costs;
  costs.stages = {Costs(2, 4, 3, 1), Costs(6, 8, 5, 3)};
  costs.boundaries = {Latency(7)};
  // Twice as many stages: each old stage in two halves.
  EXPECT_EQ(RecutChainCosts(costs, 4).stages,
            (std::vector<StageCosts>{Costs(1, 2, 1.5, 0.5), Costs(1, 2, 1.5, 0.5),
                                     Costs(3, 4, 2.5, 1.5), Costs(3, 4, 2.5, 1.5)}));
  // One stage: the whole chain.
  EXPECT_EQ(RecutChainCosts(costs, 1).stages, (std::vector<StageCosts>{Costs(8, 12, 8, 4)}));
  // Three: the middle one takes a third of each, and the chain's total stays.
  const std::vector<StageCosts> thirds = RecutChainCosts(costs, 3).stages;
  ASSERT_EQ(thirds.size(), 3u);
  EXPECT_DOUBLE_EQ(thirds[0].forward, 2.0 * 2 / 3);
  EXPECT_DOUBLE_EQ(thirds[1].forward, 2.0 / 3 + 6.0 / 3);
  EXPECT_DOUBLE_EQ(thirds[2].forward, 6.0 * 2 / 3);
  // A uniform boundary stays; so do figures that already fit.
  EXPECT_EQ(RecutChainCosts(costs, 4).boundaries, costs.boundaries);
  EXPECT_EQ(RecutChainCosts(costs, 2), costs);
}

// As many stages as a topology may have: the chain's total is kept, each boundary found, in
// one pass over the stages (a cut that compared every pair would not finish).
TEST(StageRecutTest, TheLargestTopologiesKeepTheChainsTotal) {
  CostModel costs;
  for (int s = 0; s < 100'000; ++s) costs.stages.push_back(Costs(s % 7, 2, 1, 1));
  costs.boundaries = std::vector<BoundaryCosts>(99'999, Latency(1));
  costs.boundaries[50'000] = Latency(5);
  const CostModel cut = RecutChainCosts(costs, 262'144);
  ASSERT_EQ(cut.stages.size(), 262'144u);
  ASSERT_EQ(cut.boundaries.size(), 262'143u);
  double given = 0;
  double total = 0;
  for (const StageCosts& c : costs.stages) given += c.forward;
  for (const StageCosts& c : cut.stages) total += c.forward;
  EXPECT_NEAR(total, given, 1e-6 * given);
  // The new boundaries nearest to given boundary 50000: its share of the depth, 1 / 100000,
  // holds 2.6 of the new spacing 1 / 262144.
  const auto nearest = std::count(cut.boundaries.begin(), cut.boundaries.end(), Latency(5));
  EXPECT_GE(nearest, 2);
  EXPECT_LE(nearest, 3);
}

TEST(StageRecutTest, AnOverlapCellIsForwardPlusBackwardWhereNotGiven) {
  CostModel costs;
  costs.stages = {Costs(2, 4, 3, 1), Costs(6, 8, 5, 3)};
  EXPECT_EQ(RecutChainCosts(costs, 1).stages[0].overlap, 0);  // every stage: F + B
  costs.stages[1].overlap = 10;
  EXPECT_EQ(RecutChainCosts(costs, 1).stages[0].overlap, 2 + 4 + 10);
}

TEST(StageRecutTest, EachNewBoundaryTakesTheNearestGivenOne) {
  CostModel costs;
  costs.stages = {Costs(1, 2, 1, 1)};
  costs.boundaries = {Latency(1), Latency(2), Latency(3)};  // at depths 1/4, 2/4, 3/4
  // New boundaries at 1/8 ... 7/8; 3/8 and 5/8 lie halfway and take the lower one.
  EXPECT_EQ(RecutChainCosts(costs, 8).boundaries,
            (std::vector<BoundaryCosts>{Latency(1), Latency(1), Latency(1), Latency(2), Latency(2),
                                        Latency(3), Latency(3)}));
  EXPECT_EQ(RecutChainCosts(costs, 2).boundaries, (std::vector<BoundaryCosts>{Latency(2)}));
}

// Two profiled stages (bytes): the first receives nothing, the second a 100-byte input. Cut
// in four, the activations past the input, what I frees and the static bytes are halved;
// every stage but the first receives the model's message and keeps its input gradient; the
// transients are those of the stage each half comes from, and only the last receives no
// gradient.
TEST(StageRecutTest, MemoryByDepthWithTheModelsMessages) {
  MemoryModel memory;
  memory.unit = MemoryUnit::kBytes;
  memory.stages = {StageMemory{.activation = 1000,
                               .freed_by_input = 200,
                               .forward_transient = 10,
                               .input_transient = 50,
                               .static_bytes = 5000,
                               .received_gradient = 40},
                   StageMemory{.activation = 1100,
                               .freed_by_input = 200,
                               .forward_transient = 20,
                               .input_transient = 30,
                               .retained = 100,
                               .static_bytes = 3000,
                               .received_input = 100}};
  memory.static_per_rank = 7;
  const MemoryModel cut = RecutChainMemory(memory, 1, 4);
  EXPECT_EQ(cut.static_per_rank, 7);
  EXPECT_EQ(cut.unit, MemoryUnit::kBytes);
  // A middle stage: half an old stage's depth, the model's messages, the old stage's
  // transients.
  const auto half_of = [](double static_bytes, double forward, double input) {
    return StageMemory{.activation = 600,
                       .freed_by_input = 100,
                       .forward_transient = forward,
                       .input_transient = input,
                       .retained = 100,
                       .static_bytes = static_bytes,
                       .received_input = 100,
                       .received_gradient = 40};
  };
  StageMemory first = half_of(2500, 10, 50);
  first.activation = 500;  // no received input
  first.retained = 0;
  first.received_input = 0;
  StageMemory third = half_of(1500, 20, 30);
  third.received_gradient = 30;  // at most the larger backward transient
  StageMemory last = half_of(1500, 20, 30);
  last.received_gradient = 0;
  EXPECT_EQ(cut.stages, (std::vector<StageMemory>{first, half_of(2500, 10, 50), third, last}));
  EXPECT_EQ(RecutChainMemory(memory, 1, 2), memory);
}

// In microbatch activations an entry of 0 is 1/V of a share: the given ones resolve at their
// V, so a share of 1 per rank stays 1 per rank however it is cut.
TEST(StageRecutTest, DefaultActivationsResolveAtTheGivenV) {
  MemoryModel memory;
  memory.stages = std::vector<StageMemory>(4);  // P = 4, V = 1: 1 each
  const MemoryModel cut = RecutChainMemory(memory, 1, 8);
  ASSERT_EQ(cut.stages.size(), 8u);
  for (const StageMemory& stage : cut.stages) EXPECT_EQ(stage.activation, 0.5);
}

// For a topology: figures that fit stay; a loop or V placement cuts the one chain; dual
// placement gives each of its two chains the whole model, with a boundary between them that
// no transfer crosses.
TEST(StageRecutTest, FitsEachChainOfTheTopology) {
  CostModel costs;
  costs.stages = {Costs(4, 8, 4, 4), Costs(4, 8, 4, 4), Costs(4, 8, 4, 4), Costs(4, 8, 4, 4)};
  costs.boundaries = {Latency(1), Latency(2), Latency(3)};
  MemoryModel memory;
  memory.stages = std::vector<StageMemory>(4, StageMemory{.activation = 2});

  const Topology v1{.ranks = 4, .stages_per_rank = 1, .microbatches = 8};
  const StageFigures same = Fit(costs, memory, v1);
  EXPECT_EQ(same.costs, costs);
  EXPECT_EQ(same.memory, memory);

  const Topology v_shape{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kVShape};
  const StageFigures v = Fit(costs, memory, v_shape);
  EXPECT_EQ(v.costs.stages, std::vector<StageCosts>(8, Costs(2, 4, 2, 2)));
  EXPECT_EQ(v.costs.boundaries.size(), 7u);
  EXPECT_EQ(v.memory.stages, std::vector<StageMemory>(8, StageMemory{.activation = 1}));

  const Topology dual{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kDual};
  const StageFigures d = Fit(costs, memory, dual);
  EXPECT_EQ(d.costs.stages, std::vector<StageCosts>(8, Costs(4, 8, 4, 4)));
  EXPECT_EQ(d.costs.boundaries,
            (std::vector<BoundaryCosts>{Latency(1), Latency(2), Latency(3), Latency(3), Latency(1),
                                        Latency(2), Latency(3)}));
  EXPECT_EQ(d.memory.stages, std::vector<StageMemory>(8, StageMemory{.activation = 2}));

  CostModel uniform;
  EXPECT_EQ(Fit(uniform, MemoryModel{}, v_shape).costs, uniform);
}

// DualPipe's second model copy holds its parameters and their gradients too: a profile of one
// chain whose stages told their static bytes and gradients (pipeplan_profiler.py) gives every
// stage of both copies its own, so each rank counts two stages' worth.
TEST(StageRecutTest, TheSecondCopyOfADualPlacementHoldsItsParametersAndGradients) {
  CostModel costs;
  costs.stages = {Costs(4, 8, 4, 4), Costs(4, 8, 4, 4)};
  MemoryModel memory;
  memory.stages = {StageMemory{.activation = 2, .static_bytes = 100, .gradient = 100},
                   StageMemory{.activation = 3, .static_bytes = 300, .gradient = 300}};
  memory.static_per_rank = 10;
  const Topology dual{
      .ranks = 2, .stages_per_rank = 2, .microbatches = 4, .placement = Placement::kDual};
  const StageFigures d = Fit(costs, memory, dual);
  ASSERT_EQ(d.memory.stages.size(), 4u);
  const StageMap map(dual);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(d.memory.StaticOf(RankId(r), map), 410.0) << "rank " << r;
    double gradients = 0.0;
    for (const StageId stage : map.StagesOf(RankId(r))) gradients += d.memory.Gradient(stage);
    EXPECT_EQ(gradients, 400.0) << "rank " << r;
  }
}

// A cost file says which stages its entries are (CostModel::chains). A chain of eight stages
// for DualPipe's dual placement at P = 4, whose eight stages are two copies of the model: each
// copy gets the chain cut into four (before, the file's first half was taken for copy A and
// its second for copy B, each half a model of half the depth). Two copies for a plan of one
// chain: the first copy, cut by depth. What is cut says the plan's chains, so that fitting
// it again changes nothing.
TEST(StageRecutTest, FiguresSayWhetherTheyAreOneChainOrADualPlacementsTwoCopies) {
  CostModel chain;
  chain.stages.clear();
  for (int s = 0; s < 8; ++s) chain.stages.push_back(Costs(1 + s, 2, 1, 1));
  chain.boundaries = {Latency(1), Latency(2), Latency(3), Latency(4),
                      Latency(5), Latency(6), Latency(7)};
  MemoryModel memory;
  memory.stages.clear();
  for (int s = 0; s < 8; ++s) memory.stages.push_back(StageMemory{.activation = 1.0 + s});
  const Topology dual{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kDual};

  const StageFigures d = Fit(chain, memory, dual);
  const std::vector<double> forwards = {1 + 2, 3 + 4, 5 + 6, 7 + 8};
  ASSERT_EQ(d.costs.stages.size(), 8u);
  for (int s = 0; s < 8; ++s) EXPECT_EQ(d.costs.stages[s].forward, forwards[s % 4]) << s;
  EXPECT_EQ(d.costs.boundaries,
            (std::vector<BoundaryCosts>{Latency(2), Latency(4), Latency(6), Latency(6), Latency(2),
                                        Latency(4), Latency(6)}));
  ASSERT_EQ(d.memory.stages.size(), 8u);
  EXPECT_EQ(d.memory.stages[1].activation, 3 + 4);
  EXPECT_EQ(d.memory.stages[5].activation, 3 + 4);
  EXPECT_EQ(d.costs.chains, 2);
  EXPECT_EQ(d.memory.chains, 2);
  const StageFigures again = Fit(d.costs, d.memory, dual);
  EXPECT_EQ(again.costs, d.costs);
  EXPECT_EQ(again.memory, d.memory);

  // The same eight entries said to be two copies fit the dual placement as they are, and give
  // a V shape their first copy, each stage cut in two.
  CostModel copies = chain;
  copies.chains = 2;
  MemoryModel copies_memory = memory;
  copies_memory.chains = 2;
  EXPECT_EQ(Fit(copies, copies_memory, dual).costs, copies);
  const Topology v_shape{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kVShape};
  const StageFigures v = Fit(copies, copies_memory, v_shape);
  ASSERT_EQ(v.costs.stages.size(), 8u);
  for (int s = 0; s < 8; ++s) {
    const int half_of = s / 2;  // the first copy's stage
    EXPECT_EQ(v.costs.stages[s].forward, (1 + half_of) / 2.0) << s;
  }
  EXPECT_EQ(v.costs.boundaries.size(), 7u);
  EXPECT_EQ(v.costs.boundaries.front(), Latency(1));
  EXPECT_EQ(v.costs.boundaries.back(), Latency(3));
  EXPECT_EQ(v.costs.chains, 1);
  EXPECT_EQ(v.memory.chains, 1);
}

// Chains are 0 or 1 (one) or 2, and two copies need an even number of stage entries.
TEST(StageRecutTest, BadChainsAreNamed) {
  CostModel costs;
  costs.chains = 3;
  EXPECT_EQ(ValidateCostModel(costs, 1).message(),
            "costs.chains: must be 0 or 1 (one chain) or 2 (two model copies, a dual "
            "placement's stages), got 3");
  MemoryModel memory;
  memory.stages = std::vector<StageMemory>(3, StageMemory{});
  memory.chains = 2;
  EXPECT_EQ(ValidateMemoryModel(memory, 3).message(),
            "memory.chains: 2 copies of the model need an even number of stage entries, got 3");
  memory.stages = {StageMemory{}};
  EXPECT_TRUE(ValidateMemoryModel(memory, 3).ok());  // uniform: one entry serves every copy
}

// Static memory measured per rank (ranks that differ, as where they took turns on one GPU) for
// a plan of another number of ranks: every rank counts the largest, an upper bound, instead of
// the plan being refused; for the profiled number of ranks each keeps its own. A bad entry is
// still named.
TEST(StageRecutTest, StaticMemoryPerRankOfAnotherPIsTheLargestForEveryRank) {
  CostModel costs;
  costs.stages = std::vector<StageCosts>(4, Costs(1, 2, 1, 1));
  MemoryModel memory;
  memory.stages = std::vector<StageMemory>(4, StageMemory{.activation = 1});
  memory.static_per_rank = 50;
  memory.static_by_rank = {70, 40, 40, 40};
  const Topology p4{.ranks = 4, .stages_per_rank = 1, .microbatches = 8};
  EXPECT_EQ(Fit(costs, memory, p4).memory, memory);
  const Topology p8_half_stages{
      .ranks = 8, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kVShape};
  const MemoryModel at_8 = Fit(costs, memory, p8_half_stages).memory;
  EXPECT_TRUE(at_8.static_by_rank.empty());
  EXPECT_EQ(at_8.static_per_rank, 70);
  const Topology p2{.ranks = 2, .stages_per_rank = 2, .microbatches = 8};  // stages fit
  EXPECT_EQ(Fit(costs, memory, p2).memory.static_per_rank, 70);
  EXPECT_TRUE(Fit(costs, memory, p2).memory.static_by_rank.empty());

  memory.static_by_rank[2] = -1;
  EXPECT_EQ(FitStageFigures(costs, memory, p2).status().message(),
            "memory.static_by_rank[2] must be a finite number >= 0, got -1.000000");
}

// The chain's ends' extras and data (the first stage's inputs, the last stage's targets, per
// microbatch, as calibrate writes them) stay with the chain's ends, where a stage's own
// static bytes follow its depth: profiled at V = 1 on two ranks, the V shape puts both ends on
// rank 0, and each rank holds half of each profiled stage's own bytes.
TEST(StageRecutTest, TheDataStayWithTheChainsEnds) {
  CostModel costs;
  costs.stages = {Costs(4, 8, 4, 4), Costs(4, 8, 4, 4)};
  costs.boundaries = {Latency(1)};
  MemoryModel memory;
  memory.stages = {StageMemory{.activation = 2, .static_bytes = 100},
                   StageMemory{.activation = 2, .static_bytes = 300}};
  memory.first_stage_static = 1000;
  memory.last_stage_static = 5000;
  memory.first_stage_data_per_microbatch = 10;
  memory.last_stage_data_per_microbatch = 20;
  const Topology v_shape{
      .ranks = 2, .stages_per_rank = 2, .microbatches = 4, .placement = Placement::kVShape};
  const StageFigures v = Fit(costs, memory, v_shape);
  const StageMap map(v_shape);
  // Rank 0 holds stages 0 and 3 (depths [0, 1/4) and [3/4, 1)), rank 1 stages 1 and 2.
  EXPECT_EQ(v.memory.StaticOf(RankId(0), map), 50 + 150 + 1000 + 5000 + 4 * 10 + 4 * 20);
  EXPECT_EQ(v.memory.StaticOf(RankId(1), map), 50 + 150);
}

// A figure that is not a finite number >= 0 is named as given, before any cut moves it.
TEST(StageRecutTest, ABadFigureIsNamedAtItsGivenEntry) {
  CostModel costs;
  costs.stages = {Costs(1, 2, 1, 1), Costs(1, 2, 1, 1), Costs(-1, 2, 1, 1), Costs(1, 2, 1, 1)};
  const Topology v_shape{
      .ranks = 4, .stages_per_rank = 2, .microbatches = 8, .placement = Placement::kVShape};
  const StatusOr<StageFigures> fitted = FitStageFigures(costs, MemoryModel{}, v_shape);
  ASSERT_FALSE(fitted.ok());
  EXPECT_EQ(fitted.status().message(),
            "costs.stages[2].forward must be a finite number >= 0, got -1.000000");
}

// Two copies of a one-stage model (one entry per copy, found by the stage_recut fuzzer): each
// copy is one uniform entry, for any plan; it was doubled into two entries, which no plan of
// four stages takes.
TEST(StageRecutTest, OneEntryPerCopyIsUniform) {
  CostModel copies;
  copies.chains = 2;
  copies.stages = {Costs(1.5, 3, 1.5, 1.5), Costs(2.5, 5, 2.5, 2.5)};
  MemoryModel memory;
  memory.chains = 2;
  memory.stages = {StageMemory{.activation = 3}, StageMemory{.activation = 4}};
  const Topology dual{
      .ranks = 2, .stages_per_rank = 2, .microbatches = 4, .placement = Placement::kDual};
  const StageFigures fitted = Fit(copies, memory, dual);
  ASSERT_EQ(fitted.costs.stages.size(), 1u);
  EXPECT_EQ(fitted.costs.stages.front().forward, 1.5);
  ASSERT_EQ(fitted.memory.stages.size(), 1u);
  EXPECT_EQ(fitted.memory.stages.front().activation, 3);
  EXPECT_TRUE(ValidateCostModel(fitted.costs, dual.num_stages()).ok());
}

// Figures that fit a double each may not once cut into fewer stages: an error saying so, not
// "got inf" for a figure the file wrote finite.
TEST(StageRecutTest, FiguresThatOverflowWhenCutAreNamed) {
  CostModel costs;
  costs.stages.assign(4, Costs(1e308, 1e308, 1e308, 1e308));
  const Topology two{.ranks = 2, .stages_per_rank = 1, .microbatches = 4};
  const StatusOr<StageFigures> fitted = FitStageFigures(costs, MemoryModel{}, two);
  ASSERT_FALSE(fitted.ok());
  EXPECT_NE(fitted.status().message().find("the figures cut by depth from 4 stages to 2"),
            std::string::npos)
      << fitted.status().message();
}

}  // namespace
}  // namespace pipeplan
