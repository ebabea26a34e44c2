// Per-layer figures of a model (a LayerCosts file), and the per-stage figures of a split of
// its layers into contiguous stages: what `pipeplan partition` searches over.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// One layer (a top-level module). Durations in LayerCosts::time_unit; memory in bytes. A layer
// needs a forward and a backward: `backward`, or I and W, or all three.
struct LayerFigures {
  std::string name;  // its fully qualified name, unique in the file
  std::optional<double> forward;
  std::optional<double> backward;
  std::optional<double> backward_input;
  std::optional<double> backward_weight;
  double activation = 0.0;  // kept per microbatch by its forward until its backward
  double freed_by_input = 0.0;
  double parameter_bytes = 0.0;
  double output_bytes = 0.0;  // one microbatch's output: the message to the next stage
  // Held inside each part above the larger of its start's and its end's (StageMemory's
  // transients); a stage's is the largest of its layers'.
  double forward_transient = 0.0;
  double backward_transient = 0.0;
  double input_transient = 0.0;
  double weight_transient = 0.0;
  // Allocated by I and freed by W (StageMemory::allocated_by_input): what W computes from.
  double allocated_by_input = 0.0;

  // B as given, else I + W (a valid layer has one or the other).
  double FullBackward() const {
    return backward.value_or(backward_input.value_or(0) + backward_weight.value_or(0));
  }
  bool operator==(const LayerFigures&) const = default;
};

// A parameter used by several of the model's layers (an LM head tied to its embedding): in
// each one's parameter_bytes, and held once by a rank holding more than one of them.
struct SharedParameter {
  std::string name;  // the parameter's name in the model, for messages
  double bytes = 0.0;
  std::vector<std::string> layers;  // the layers using it, at least two

  bool operator==(const SharedParameter&) const = default;
};

struct LayerCosts {
  std::vector<LayerFigures> layers;  // in model order
  std::vector<SharedParameter> shared_parameters;
  std::string time_unit;
  // Gradient and optimizer bytes per parameter byte: static memory is parameters x (1 + it).
  double optimizer_multiple = 0.0;

  // Whether any layer gives memory (then a split's memory model counts bytes).
  bool HasMemory() const;
  bool operator==(const LayerCosts&) const = default;
};

// At least one layer; names non-empty and unique; every figure finite and >= 0; each layer
// with a forward and a backward (B, or I and W); freed_by_input at most the activation; a
// shared parameter named, used by two or more distinct layers of the file, its bytes within
// each one's parameter_bytes.
// Errors name the layer: "layers[3] (blocks.2).forward: must be >= 0, got -1".
Status ValidateLayerCosts(const LayerCosts& layers);

// A split: stage k (in chain order) holds layers [starts[k], starts[k + 1]), the last up to
// the end. starts[0] == 0 and strictly increasing.
using LayerSplit = std::vector<int>;

// `count` stages of (as near as can be) equal numbers of layers, the earlier ones the larger:
// torchtitan's default split.
LayerSplit EvenSplit(int layers, int count);

// What a transfer between two stages costs: a latency, and the message's bytes over a
// bandwidth (bytes per time unit; 0: infinite).
struct LinkCosts {
  double latency = 0.0;
  double bandwidth = 0.0;
};

// The bytes of one microbatch's output of stage `stage` of `split`: its last layer's.
double StageOutputBytes(const LayerCosts& layers, const LayerSplit& split, int stage);

// The figures of a plan's stages where `split` cuts the layers into one chain's stages, for
// `topology` (its stages: the chain, or under dual placement the chain twice, one copy after
// the other). A stage's durations are its layers' sums; where a layer has no B it is I + W,
// where it has no I and W they are B / 2 each, marked assumed (cost_model.h) so that advice
// resting on them says so. With memory (HasMemory), the memory model counts bytes: a stage's
// activation, what I frees and its static memory are its layers' sums (a shared parameter
// counted once per rank and model copy: the stages after the first of a rank that hold it
// leave it out), its received input the
// previous stage's last output, its transients the largest of its layers' (one layer runs at a
// time). Each boundary carries the lower stage's last output.
StageFigures FiguresOfSplit(const LayerCosts& layers, const LayerSplit& split, LinkCosts link,
                            const Topology& topology);

}  // namespace pipeplan
