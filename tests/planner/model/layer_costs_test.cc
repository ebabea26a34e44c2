// LayerCosts: what a split's stages sum to, what is marked assumed, and the checks naming the
// layer and field at fault.
#include "pipeplan/model/layer_costs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace pipeplan {
namespace {

LayerCosts ThreeLayers() {
  LayerCosts layers;
  layers.time_unit = "ms";
  layers.optimizer_multiple = 3;
  layers.layers = {{.name = "embed",
                    .forward = 1,
                    .backward = 2,
                    .backward_input = 1.5,
                    .backward_weight = 0.5,
                    .activation = 100,
                    .freed_by_input = 10,
                    .parameter_bytes = 1000,
                    .output_bytes = 40},
                   {.name = "block",
                    .forward = 2,
                    .backward = 4,
                    .backward_input = 2.5,
                    .backward_weight = 1.5,
                    .activation = 200,
                    .freed_by_input = 20,
                    .parameter_bytes = 2000,
                    .output_bytes = 50},
                   {.name = "head",
                    .forward = 4,
                    .backward = 8,
                    .backward_input = 5,
                    .backward_weight = 3,
                    .activation = 300,
                    .freed_by_input = 0,
                    .parameter_bytes = 3000,
                    .output_bytes = 0}};
  return layers;
}

TEST(LayerCosts, AStagesFiguresAreItsLayersSums) {
  const Topology topology{
      .ranks = 2, .stages_per_rank = 1, .microbatches = 4, .placement = Placement::kLoop};
  const StageFigures figures =
      FiguresOfSplit(ThreeLayers(), {0, 2}, {.latency = 0.25, .bandwidth = 100}, topology);
  ASSERT_EQ(figures.costs.stages.size(), 2u);
  EXPECT_EQ(
      figures.costs.stages[0],
      (StageCosts{
          .forward = 3, .backward = 6, .backward_input = 4, .backward_weight = 2, .overlap = 0}));
  EXPECT_EQ(
      figures.costs.stages[1],
      (StageCosts{
          .forward = 4, .backward = 8, .backward_input = 5, .backward_weight = 3, .overlap = 0}));
  EXPECT_TRUE(figures.costs.sources.empty());  // every figure given
  ASSERT_EQ(figures.costs.boundaries.size(), 1u);
  // The message out of stage 0 is its last layer's output.
  EXPECT_EQ(figures.costs.boundaries[0],
            (BoundaryCosts{
                .latency = 0.25, .bandwidth = 100, .activation_bytes = 50, .receive_overhead = 0}));
  EXPECT_EQ(figures.costs.time_unit, "ms");
  ASSERT_EQ(figures.memory.unit, MemoryUnit::kBytes);
  ASSERT_EQ(figures.memory.stages.size(), 2u);
  EXPECT_EQ(figures.memory.stages[0].activation, 300);
  EXPECT_EQ(figures.memory.stages[0].freed_by_input, 30);
  EXPECT_EQ(figures.memory.stages[0].static_bytes, 3000 * 4);  // parameters x (1 + 3)
  EXPECT_EQ(figures.memory.stages[0].received_input, 0);
  EXPECT_EQ(figures.memory.stages[1].received_input, 50);
  EXPECT_EQ(figures.memory.stages[1].static_bytes, 3000 * 4);
}

// One layer runs at a time: a stage's transient is its largest layer's, not their sum; what
// I keeps for W is every layer's, held together.
TEST(LayerCosts, AStagesTransientsAreItsLargestLayers) {
  LayerCosts layers = ThreeLayers();
  layers.layers[0].backward_transient = 70;
  layers.layers[1].backward_transient = 60;
  layers.layers[1].forward_transient = 5;
  layers.layers[1].input_transient = 8;
  layers.layers[0].weight_transient = 9;
  layers.layers[2].backward_transient = 500;  // the head's logits' gradient and softmax
  layers.layers[0].allocated_by_input = 30;   // I keeps for W: summed, all held at once
  layers.layers[1].allocated_by_input = 40;
  const Topology topology{
      .ranks = 2, .stages_per_rank = 1, .microbatches = 4, .placement = Placement::kLoop};
  const StageFigures figures = FiguresOfSplit(layers, {0, 2}, {}, topology);
  ASSERT_EQ(figures.memory.stages.size(), 2u);
  const StageMemory& first = figures.memory.stages[0];
  EXPECT_EQ(first.backward_transient, 70);
  EXPECT_EQ(first.forward_transient, 5);
  EXPECT_EQ(first.input_transient, 8);
  EXPECT_EQ(first.weight_transient, 9);
  EXPECT_EQ(first.allocated_by_input, 70);
  EXPECT_EQ(figures.memory.stages[1].backward_transient, 500);
  EXPECT_EQ(figures.memory.stages[1].forward_transient, 0);
}

// An LM head tied to its embedding: each counts the matrix in its parameter_bytes; a rank
// holding both (a V shape's rank 0 holds the first stage and the last; one stage holding all)
// holds it once, ranks holding one each hold a copy each.
TEST(LayerCosts, ASharedParameterIsHeldOncePerRank) {
  LayerCosts layers;
  layers.optimizer_multiple = 1;
  for (const char* name : {"embed", "block.0", "block.1", "head"}) {
    const bool end = name == std::string("embed") || name == std::string("head");
    LayerFigures layer;
    layer.name = name;
    layer.forward = 1;
    layer.backward = 2;
    layer.parameter_bytes = end ? 1000.0 : 100.0;
    layers.layers.push_back(layer);
  }
  layers.shared_parameters = {{.name = "embed.weight", .bytes = 800, .layers = {"embed", "head"}}};
  ASSERT_TRUE(ValidateLayerCosts(layers).ok());
  const auto statics = [&](Placement placement, int ranks, const LayerSplit& split) {
    const Topology topology{.ranks = ranks,
                            .stages_per_rank = static_cast<int>(split.size()) / ranks,
                            .microbatches = 4,
                            .placement = placement};
    std::vector<double> out;
    for (const StageMemory& stage : FiguresOfSplit(layers, split, {}, topology).memory.stages) {
      out.push_back(stage.static_bytes);
    }
    return out;
  };
  // V shape: rank 0 holds stages 0 (embed) and 3 (head); stage 3 leaves the matrix out.
  EXPECT_EQ(statics(Placement::kVShape, 2, {0, 1, 2, 3}),
            (std::vector<double>{2000, 200, 200, 400}));
  // Loop: the head's stage 3 is on rank 1, which holds no other copy.
  EXPECT_EQ(statics(Placement::kLoop, 2, {0, 1, 2, 3}),
            (std::vector<double>{2000, 200, 200, 2000}));
  // One stage holding every layer.
  EXPECT_EQ(statics(Placement::kLoop, 1, {0}), (std::vector<double>{(2200 - 800) * 2}));
}

TEST(LayerCosts, DualPlacementCarriesTheChainTwice) {
  const Topology topology{
      .ranks = 2, .stages_per_rank = 2, .microbatches = 4, .placement = Placement::kDual};
  const StageFigures figures = FiguresOfSplit(ThreeLayers(), {0, 1}, {}, topology);
  ASSERT_EQ(figures.costs.stages.size(), 4u);
  EXPECT_EQ(figures.costs.chains, 2);
  EXPECT_EQ(figures.costs.stages[2], figures.costs.stages[0]);
  EXPECT_EQ(figures.costs.stages[3], figures.costs.stages[1]);
  EXPECT_EQ(figures.costs.boundaries.size(), 3u);
  EXPECT_EQ(figures.memory.stages.size(), 4u);
}

TEST(LayerCosts, AMissingSplitOrFullBackwardIsMarkedAssumed) {
  LayerCosts layers = ThreeLayers();
  layers.layers[0].backward_input.reset();
  layers.layers[0].backward_weight.reset();
  layers.layers[2].backward.reset();
  const Topology topology{
      .ranks = 2, .stages_per_rank = 1, .microbatches = 4, .placement = Placement::kLoop};
  const StageFigures figures = FiguresOfSplit(layers, {0, 2}, {}, topology);
  ASSERT_EQ(figures.costs.sources.size(), 2u);
  // Stage 0: layer 0's I and W are B / 2 each.
  EXPECT_EQ(figures.costs.stages[0].backward_input, 1 + 2.5);
  EXPECT_EQ(figures.costs.sources[0].backward_input.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(figures.costs.sources[0].backward.origin, FigureOrigin::kGiven);
  // Stage 1: its B is I + W.
  EXPECT_EQ(figures.costs.stages[1].backward, 8);
  EXPECT_EQ(figures.costs.sources[1].backward.origin, FigureOrigin::kAssumed);
  EXPECT_EQ(figures.costs.sources[1].backward_input.origin, FigureOrigin::kGiven);
}

TEST(LayerCosts, TimeAloneLeavesTheMemoryModelInItsDefaultUnit) {
  LayerCosts layers;
  layers.layers.resize(2);
  for (LayerFigures& layer : layers.layers) {
    layer.forward = 1;
    layer.backward = 2;
  }
  layers.layers[0].name = "a";
  layers.layers[1].name = "b";
  EXPECT_FALSE(layers.HasMemory());
  const StageFigures figures =
      FiguresOfSplit(layers, {0, 1}, {}, Topology{2, 1, 2, Placement::kLoop});
  EXPECT_EQ(figures.memory.unit, MemoryUnit::kModel);
  EXPECT_EQ(figures.memory.stages[0], StageMemory{});
}

TEST(LayerCosts, EvenSplitGivesTheEarlierStagesTheExtraLayers) {
  EXPECT_EQ(EvenSplit(10, 4), (LayerSplit{0, 3, 6, 8}));
  EXPECT_EQ(EvenSplit(8, 4), (LayerSplit{0, 2, 4, 6}));
  EXPECT_EQ(EvenSplit(3, 3), (LayerSplit{0, 1, 2}));
}

TEST(LayerCosts, ChecksNameTheLayerAndField) {
  const auto error = [](const LayerCosts& layers) { return ValidateLayerCosts(layers).message(); };
  EXPECT_EQ(error(LayerCosts{}), "layers: none given");
  LayerCosts layers = ThreeLayers();
  layers.layers[1].forward = -1;
  EXPECT_EQ(error(layers), "layers[1] (block).forward: must be a finite number >= 0, got -1");
  layers = ThreeLayers();
  layers.layers[2].activation = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(error(layers).rfind("layers[2] (head).activation: must be a finite number", 0), 0u);
  layers = ThreeLayers();
  layers.layers[2].backward.reset();
  layers.layers[2].backward_input.reset();
  EXPECT_EQ(error(layers),
            "layers[2] (head): no backward (give backward, or backward_input and "
            "backward_weight)");
  layers = ThreeLayers();
  layers.layers[0].forward.reset();
  EXPECT_EQ(error(layers), "layers[0] (embed): no forward");
  layers = ThreeLayers();
  layers.layers[1].name = "embed";
  EXPECT_EQ(error(layers), "layers[1] (embed).name: 'embed' is given twice");
  layers = ThreeLayers();
  layers.layers[1].name = "";
  EXPECT_EQ(error(layers), "layers[1].name: empty");
  layers = ThreeLayers();
  layers.layers[0].freed_by_input = 101;
  EXPECT_EQ(error(layers),
            "layers[0] (embed).freed_by_input: 101 is more than the activation it frees from "
            "(100)");
  layers = ThreeLayers();
  layers.layers[2].weight_transient = -3;
  EXPECT_EQ(error(layers),
            "layers[2] (head).weight_transient: must be a finite number >= 0, got -3");
  layers = ThreeLayers();
  layers.shared_parameters = {{.name = "tied", .bytes = 1001, .layers = {"embed", "head"}}};
  EXPECT_EQ(error(layers),
            "shared_parameters[0] (tied).bytes: 1001 is more than layer 'embed' holds "
            "(parameter_bytes 1000)");
  layers.shared_parameters[0] = {.name = "tied", .bytes = 10, .layers = {"embed", "lm_head"}};
  EXPECT_EQ(error(layers),
            "shared_parameters[0] (tied).layers: 'lm_head' is not a layer of the file");
  layers.shared_parameters[0].layers = {"embed"};
  EXPECT_EQ(error(layers),
            "shared_parameters[0] (tied).layers: a shared parameter needs two layers or more, "
            "got 1");
  layers = ThreeLayers();
  layers.optimizer_multiple = -1;
  EXPECT_EQ(error(layers), "optimizer_multiple: must be a finite number >= 0, got -1");
  EXPECT_TRUE(ValidateLayerCosts(ThreeLayers()).ok());
}

}  // namespace
}  // namespace pipeplan
