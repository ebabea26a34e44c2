#include "pipeplan/measurement/layer_trace.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/model/action.h"

namespace pipeplan {
namespace {

// Everything the traces say of one layer.
struct LayerSamples {
  std::string name;
  // The smallest stage whose forward action holds one of its forward ranges (a pipelining
  // job's "PP:" ranges); none outside such a job.
  std::optional<int> stage;
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> activation;
  const TraceLayerBytes* bytes = nullptr;
};

double Duration(const TraceLayerRange& range) {
  if (range.device_start.has_value() && range.device_end.has_value()) {
    return *range.device_end - *range.device_start;
  }
  return range.end - range.start;
}

// One allocator's totals in time order: what it held just before a time, and at it.
class Allocator {
 public:
  Allocator(const std::vector<TraceMemory>& memory, bool device) {
    for (const TraceMemory& event : memory) {
      if (event.device == device) events_.push_back(event);
    }
  }
  bool empty() const { return events_.empty(); }

  // The total after every event up to `time` (strictly before it unless `inclusive`); before
  // the first event, what it held before that one allocated.
  double At(double time, bool inclusive) const {
    const auto after =
        inclusive ? std::upper_bound(events_.begin(), events_.end(), time, TimeBeforeEvent)
                  : std::lower_bound(events_.begin(), events_.end(), time, EventBeforeTime);
    if (after == events_.begin()) return events_.front().allocated - events_.front().bytes;
    return std::prev(after)->allocated;
  }

 private:
  static bool TimeBeforeEvent(double time, const TraceMemory& event) { return time < event.time; }
  static bool EventBeforeTime(const TraceMemory& event, double time) { return event.time < time; }
  std::vector<TraceMemory> events_;
};

// A trace's forward actions by start: which stage's forward a layer's range ran inside.
class ForwardActions {
 public:
  explicit ForwardActions(const TorchTrace& trace) {
    for (const TraceAction& action : trace.actions) {
      if (action.action.kind == ActionKind::kForward) forwards_.push_back(&action);
    }
    std::sort(forwards_.begin(), forwards_.end(),
              [](const TraceAction* a, const TraceAction* b) { return a->start < b->start; });
  }

  std::optional<int> StageAround(const TraceLayerRange& range) const {
    auto after = std::upper_bound(
        forwards_.begin(), forwards_.end(), range.start,
        [](double time, const TraceAction* action) { return time < action->start; });
    if (after == forwards_.begin()) return std::nullopt;
    const TraceAction& action = **std::prev(after);
    if (action.end < range.end) return std::nullopt;
    return action.action.stage.value;
  }

 private:
  std::vector<const TraceAction*> forwards_;
};

Status RefuseSplitBackward(const TraceFile& file) {
  for (const TraceAction& action : file.trace.actions) {
    if (action.action.kind == ActionKind::kBackwardInput ||
        action.action.kind == ActionKind::kBackwardWeight) {
      return InvalidArgument(
          file.name + ": the job splits the backward into I and W (action PP:" + action.token +
          "), where a layer's backward range times only its I; mark the layers in a job that runs "
          "whole backwards (Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B, a plain "
          "training loop), or measure them with pipeplan.torch.measure_layers");
    }
  }
  return Status::Ok();
}

// Adds one trace's ranges to `layers` (found by name in `index`), new layers in the order
// their first forward ran.
Status Collect(const TraceFile& file, std::vector<LayerSamples>& layers,
               std::map<std::string, size_t>& index) {
  PIPEPLAN_RETURN_IF_ERROR(RefuseSplitBackward(file));
  const TorchTrace& trace = file.trace;
  bool on_device = false;
  for (const TraceLayerRange& range : trace.layer_ranges) {
    on_device = on_device || range.device_start.has_value();
  }
  const Allocator allocator(trace.memory, on_device);
  const ForwardActions forwards(trace);
  for (const TraceLayerRange& range : trace.layer_ranges) {
    auto [at, added] = index.try_emplace(range.layer, layers.size());
    if (added) {
      if (range.backward) {
        return InvalidArgument(file.name + ": event " + std::to_string(range.event) + ": layer '" +
                               range.layer +
                               "' has a backward range before any forward range of it");
      }
      layers.emplace_back().name = range.layer;
    }
    LayerSamples& layer = layers[at->second];
    (range.backward ? layer.backward : layer.forward).push_back(Duration(range));
    if (range.backward) continue;
    if (!allocator.empty()) {
      layer.activation.push_back(
          std::max(0.0, allocator.At(range.end, true) - allocator.At(range.start, false)));
    }
    if (const std::optional<int> stage = forwards.StageAround(range)) {
      layer.stage = std::min(layer.stage.value_or(*stage), *stage);
    }
  }
  for (const TraceLayerBytes& bytes : trace.layer_bytes) {
    if (auto it = index.find(bytes.layer);
        it != index.end() && layers[it->second].bytes == nullptr) {
      layers[it->second].bytes = &bytes;
    }
  }
  return Status::Ok();
}

double MedianOf(const std::vector<double>& samples) { return SummarizeDurations(samples).median; }

std::string Listed(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// What the figures leave out: layers without a backward, bytes not measured, I and W.
std::vector<std::string> NotesOf(const std::vector<std::string>& no_backward, bool memory,
                                 const std::vector<std::string>& no_bytes) {
  std::vector<std::string> notes;
  if (!no_backward.empty()) {
    notes.push_back("no backward range of " + Listed(no_backward) +
                    " (nothing in it needed a gradient): its backward is 0");
  }
  if (!memory) {
    notes.emplace_back(
        "time only: the traces' allocator events (profile_memory=True) do not cover every "
        "layer's forward, so the file has no bytes and 'pipeplan partition' plans time alone");
  } else if (!no_bytes.empty()) {
    notes.push_back("no parameter or output bytes of " + Listed(no_bytes) +
                    " (the traces' pipeplan_layers metadata does not name them): 0");
  }
  notes.emplace_back(
      "I and W are not split by the ranges: 'pipeplan partition' takes B/2 each and says so");
  return notes;
}

}  // namespace

StatusOr<LayerTraceImport> LayerCostsOfTraces(const std::vector<TraceFile>& ranks) {
  std::vector<LayerSamples> layers;
  std::map<std::string, size_t> index;
  for (const TraceFile& file : ranks) PIPEPLAN_RETURN_IF_ERROR(Collect(file, layers, index));
  if (layers.empty()) {
    return InvalidArgument("the traces have no 'pipeplan.layer.' ranges");
  }
  // In a pipelining job a rank may hold stages apart in the model (interleaved, V shapes):
  // the stages say the order; within a stage, the order its layers first ran.
  if (std::all_of(layers.begin(), layers.end(),
                  [](const LayerSamples& layer) { return layer.stage.has_value(); })) {
    std::stable_sort(
        layers.begin(), layers.end(),
        [](const LayerSamples& a, const LayerSamples& b) { return *a.stage < *b.stage; });
  }
  LayerTraceImport out;
  out.costs.time_unit = "us";
  bool memory = true;
  for (const LayerSamples& layer : layers) memory = memory && !layer.activation.empty();
  std::vector<std::string> no_backward;
  std::vector<std::string> no_bytes;
  for (const LayerSamples& layer : layers) {
    LayerFigures figures;
    figures.name = layer.name;
    figures.forward = MedianOf(layer.forward);
    figures.backward = layer.backward.empty() ? 0.0 : MedianOf(layer.backward);
    if (layer.backward.empty()) no_backward.push_back(layer.name);
    if (memory) {
      figures.activation = MedianOf(layer.activation);
      if (layer.bytes != nullptr) {
        figures.parameter_bytes = layer.bytes->parameter_bytes;
        figures.output_bytes = layer.bytes->output_bytes.value_or(0.0);
      } else {
        no_bytes.push_back(layer.name);
      }
    }
    out.costs.layers.push_back(std::move(figures));
    out.counts.push_back(
        {static_cast<int>(layer.forward.size()), static_cast<int>(layer.backward.size())});
  }
  out.notes = NotesOf(no_backward, memory, no_bytes);
  PIPEPLAN_RETURN_IF_ERROR(ValidateLayerCosts(out.costs));
  return out;
}

}  // namespace pipeplan
