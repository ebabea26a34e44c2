#include "pipeplan/model/layer_costs.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

Status CheckFigure(const std::string& where, const char* field, std::optional<double> value) {
  if (!value.has_value() || (std::isfinite(*value) && *value >= 0)) return Status::Ok();
  return InvalidArgument(where + "." + field + ": must be a finite number >= 0, got " +
                         FormatNumber(*value));
}

Status CheckLayer(const LayerFigures& layer, const std::string& where) {
  const std::pair<const char*, std::optional<double>> figures[] = {
      {"forward", layer.forward},
      {"backward", layer.backward},
      {"backward_input", layer.backward_input},
      {"backward_weight", layer.backward_weight},
      {"activation", layer.activation},
      {"freed_by_input", layer.freed_by_input},
      {"parameter_bytes", layer.parameter_bytes},
      {"output_bytes", layer.output_bytes},
      {"forward_transient", layer.forward_transient},
      {"backward_transient", layer.backward_transient},
      {"input_transient", layer.input_transient},
      {"weight_transient", layer.weight_transient},
      {"allocated_by_input", layer.allocated_by_input}};
  for (const auto& [field, value] : figures) {
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(where, field, value));
  }
  if (!layer.forward.has_value()) return InvalidArgument(where + ": no forward");
  const bool split = layer.backward_input.has_value() && layer.backward_weight.has_value();
  if (!layer.backward.has_value() && !split) {
    return InvalidArgument(where +
                           ": no backward (give backward, or backward_input and "
                           "backward_weight)");
  }
  if (layer.backward_input.has_value() != layer.backward_weight.has_value()) {
    return InvalidArgument(where + ": backward_input and backward_weight go together");
  }
  if (layer.freed_by_input > layer.activation) {
    return InvalidArgument(where + ".freed_by_input: " + FormatNumber(layer.freed_by_input) +
                           " is more than the activation it frees from (" +
                           FormatNumber(layer.activation) + ")");
  }
  return Status::Ok();
}

// The sums of one stage's layers, with what was assumed for them.
struct StageSum {
  StageCosts costs{
      .forward = 0, .backward = 0, .backward_input = 0, .backward_weight = 0, .overlap = 0};
  StageSources sources;
  StageMemory memory;
};

StageSum SumOf(const LayerCosts& layers, int first, int end, double optimizer_multiple) {
  StageSum sum;
  const FigureSource assumed{.origin = FigureOrigin::kAssumed, .run = 0};
  for (int i = first; i < end; ++i) {
    const LayerFigures& layer = layers.layers[static_cast<size_t>(i)];
    const bool split = layer.backward_input.has_value();
    const double backward = layer.FullBackward();
    sum.costs.forward += *layer.forward;
    sum.costs.backward += backward;
    sum.costs.backward_input += split ? *layer.backward_input : backward / 2;
    sum.costs.backward_weight += split ? *layer.backward_weight : backward / 2;
    if (!layer.backward.has_value()) sum.sources.backward = assumed;
    if (!split) sum.sources.AssumeSplit();
    sum.memory.activation += layer.activation;
    sum.memory.freed_by_input += layer.freed_by_input;
    sum.memory.allocated_by_input += layer.allocated_by_input;
    sum.memory.static_bytes += layer.parameter_bytes * (1 + optimizer_multiple);
    sum.memory.forward_transient = std::max(sum.memory.forward_transient, layer.forward_transient);
    sum.memory.backward_transient =
        std::max(sum.memory.backward_transient, layer.backward_transient);
    sum.memory.input_transient = std::max(sum.memory.input_transient, layer.input_transient);
    sum.memory.weight_transient = std::max(sum.memory.weight_transient, layer.weight_transient);
  }
  return sum;
}

Status CheckShared(const LayerCosts& layers, size_t index) {
  const SharedParameter& shared = layers.shared_parameters[index];
  const std::string where = "shared_parameters[" + std::to_string(index) + "]" +
                            (shared.name.empty() ? "" : " (" + shared.name + ")");
  if (shared.name.empty()) return InvalidArgument(where + ".name: empty");
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(where, "bytes", shared.bytes));
  if (shared.layers.size() < 2) {
    return InvalidArgument(where + ".layers: a shared parameter needs two layers or more, got " +
                           std::to_string(shared.layers.size()));
  }
  std::set<std::string> seen;
  for (const std::string& name : shared.layers) {
    const auto layer = std::find_if(layers.layers.begin(), layers.layers.end(),
                                    [&](const LayerFigures& l) { return l.name == name; });
    if (layer == layers.layers.end()) {
      return InvalidArgument(where + ".layers: '" + name + "' is not a layer of the file");
    }
    if (!seen.insert(name).second) {
      return InvalidArgument(where + ".layers: '" + name + "' is given twice");
    }
    if (shared.bytes > layer->parameter_bytes) {
      return InvalidArgument(where + ".bytes: " + FormatNumber(shared.bytes) +
                             " is more than layer '" + name + "' holds (parameter_bytes " +
                             FormatNumber(layer->parameter_bytes) + ")");
    }
  }
  return Status::Ok();
}

// A shared parameter is in each of its layers' parameter_bytes; a rank holds it once per model
// copy: every stage after the first of that rank and copy to hold it (or a second of its
// layers in one stage) leaves it out of its static memory.
void CountSharedOnce(const LayerCosts& layers, const LayerSplit& split, const Topology& topology,
                     MemoryModel* memory) {
  const StageMap map(topology);
  const int count = static_cast<int>(split.size());
  const int total = static_cast<int>(layers.layers.size());
  for (const SharedParameter& shared : layers.shared_parameters) {
    const double per_copy = shared.bytes * (1 + layers.optimizer_multiple);
    for (int copy = 0; copy < map.chains(); ++copy) {
      std::set<int> holding;  // the ranks holding it already
      for (int k = 0; k < count; ++k) {
        const int stage = copy * count + k;
        const int end = k + 1 < count ? split[static_cast<size_t>(k) + 1] : total;
        for (int i = split[static_cast<size_t>(k)]; i < end; ++i) {
          const std::string& name = layers.layers[static_cast<size_t>(i)].name;
          if (std::find(shared.layers.begin(), shared.layers.end(), name) == shared.layers.end()) {
            continue;
          }
          if (!holding.insert(map.RankOf(StageId(stage)).value).second) {
            memory->stages[static_cast<size_t>(stage)].static_bytes -= per_copy;
          }
        }
      }
    }
  }
}

}  // namespace

bool LayerCosts::HasMemory() const {
  return std::any_of(layers.begin(), layers.end(), [](const LayerFigures& layer) {
    return layer.activation > 0 || layer.parameter_bytes > 0 || layer.output_bytes > 0 ||
           layer.forward_transient > 0 || layer.backward_transient > 0 ||
           layer.input_transient > 0 || layer.weight_transient > 0 || layer.allocated_by_input > 0;
  });
}

Status ValidateLayerCosts(const LayerCosts& layers) {
  if (layers.layers.empty()) return InvalidArgument("layers: none given");
  if (!std::isfinite(layers.optimizer_multiple) || layers.optimizer_multiple < 0) {
    return InvalidArgument("optimizer_multiple: must be a finite number >= 0, got " +
                           FormatNumber(layers.optimizer_multiple));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < layers.layers.size(); ++i) {
    const LayerFigures& layer = layers.layers[i];
    const std::string where =
        "layers[" + std::to_string(i) + "]" + (layer.name.empty() ? "" : " (" + layer.name + ")");
    if (layer.name.empty()) return InvalidArgument(where + ".name: empty");
    if (!names.insert(layer.name).second) {
      return InvalidArgument(where + ".name: '" + layer.name + "' is given twice");
    }
    PIPEPLAN_RETURN_IF_ERROR(CheckLayer(layer, where));
  }
  for (size_t i = 0; i < layers.shared_parameters.size(); ++i) {
    PIPEPLAN_RETURN_IF_ERROR(CheckShared(layers, i));
  }
  return Status::Ok();
}

LayerSplit EvenSplit(int layers, int count) {
  LayerSplit split;
  int start = 0;
  for (int k = 0; k < count; ++k) {
    split.push_back(start);
    start += layers / count + (k < layers % count ? 1 : 0);
  }
  return split;
}

double StageOutputBytes(const LayerCosts& layers, const LayerSplit& split, int stage) {
  const size_t k = static_cast<size_t>(stage);
  const size_t end =
      k + 1 < split.size() ? static_cast<size_t>(split[k + 1]) : layers.layers.size();
  return layers.layers[end - 1].output_bytes;
}

StageFigures FiguresOfSplit(const LayerCosts& layers, const LayerSplit& split, LinkCosts link,
                            const Topology& topology) {
  const int count = static_cast<int>(split.size());
  const int total = static_cast<int>(layers.layers.size());
  const int copies = topology.placement == Placement::kDual ? 2 : 1;
  const bool bytes = layers.HasMemory();
  StageFigures out;
  out.costs.stages.clear();
  out.costs.boundaries.clear();
  out.costs.time_unit = layers.time_unit;
  out.costs.chains = copies;
  out.memory.stages.clear();
  out.memory.chains = copies;
  out.memory.unit = bytes ? MemoryUnit::kBytes : MemoryUnit::kModel;
  bool any_assumed = false;
  std::vector<StageSum> sums;
  for (int k = 0; k < count; ++k) {
    const int end = k + 1 < count ? split[static_cast<size_t>(k) + 1] : total;
    sums.push_back(SumOf(layers, split[static_cast<size_t>(k)], end, layers.optimizer_multiple));
    any_assumed = any_assumed || sums.back().sources != StageSources{};
  }
  const auto output_of = [&](int k) { return StageOutputBytes(layers, split, k); };
  for (int copy = 0; copy < copies; ++copy) {
    for (int k = 0; k < count; ++k) {
      StageSum& sum = sums[static_cast<size_t>(k)];
      out.costs.stages.push_back(sum.costs);
      if (any_assumed) out.costs.sources.push_back(sum.sources);
      StageMemory memory = bytes ? sum.memory : StageMemory{};
      if (bytes && k > 0) memory.received_input = std::min(output_of(k - 1), memory.activation);
      out.memory.stages.push_back(memory);
      if (copy + 1 == copies && k + 1 == count) continue;
      const double message = output_of(k);
      out.costs.boundaries.push_back({.latency = link.latency,
                                      .bandwidth = link.bandwidth,
                                      .activation_bytes = message,
                                      .receive_overhead = 0.0});
    }
  }
  if (bytes) CountSharedOnce(layers, split, topology, &out.memory);
  // One stage sends nothing; a cost model still has its one uniform boundary entry.
  if (out.costs.boundaries.empty()) {
    out.costs.boundaries.push_back({.latency = link.latency, .bandwidth = link.bandwidth});
  }
  return out;
}

}  // namespace pipeplan
