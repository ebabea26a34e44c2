#include "trace_metadata.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

namespace pipeplan::trace_json {
namespace {

// pipeplan_profiler.py's metadata `key`: an object whose keys are whole numbers >= 0 (step
// numbers, stage indices; `what` names them in errors). Calls read(number, where, value) for
// each entry, `where` naming it ("key.12").
template <typename Read>
Status ReadNumberedEntries(od::value value, std::string_view key, std::string_view what,
                           Read read) {
  od::object entries;
  if (const auto error = value.get_object().get(entries)) return JsonError(key, error);
  for (auto field : entries) {
    std::string_view name;
    if (const auto error = field.unescaped_key().get(name)) return JsonError(key, error);
    const std::string where = std::string(key) + "." + std::string(name.substr(0, 40));
    int number = 0;
    const auto [end, bad] = std::from_chars(name.data(), name.data() + name.size(), number);
    if (bad != std::errc() || end != name.data() + name.size() || number < 0) {
      return InvalidArgument(where + ": the key is not " + std::string(what));
    }
    od::value entry;
    if (const auto error = field.value().get(entry)) return JsonError(where, error);
    PIPEPLAN_RETURN_IF_ERROR(read(number, where, entry));
  }
  return Status::Ok();
}

}  // namespace

Status ReadLiveBytes(od::value value, TorchTrace* trace) {
  PIPEPLAN_RETURN_IF_ERROR(
      ReadNumberedEntries(value, "pipeplan_live_bytes", "a step number",
                          [&](int step, const std::string& where, od::value bytes) -> Status {
                            PIPEPLAN_ASSIGN_OR_RETURN(const double live, BytesOf(where, bytes));
                            trace->live_bytes.emplace_back(step, live);
                            return Status::Ok();
                          }));
  std::sort(trace->live_bytes.begin(), trace->live_bytes.end());
  return Status::Ok();
}

Status ReadStageParameters(od::value value, TorchTrace* trace) {
  PIPEPLAN_RETURN_IF_ERROR(ReadNumberedEntries(
      value, "pipeplan_stages", "a stage index",
      [&](int index, const std::string& where, od::value figures) -> Status {
        TraceStageParameters stage{.stage = index};
        od::object entry;
        if (const auto error = figures.get_object().get(entry)) return JsonError(where, error);
        for (auto item : entry) {
          std::string_view name;
          if (const auto error = item.unescaped_key().get(name)) return JsonError(where, error);
          od::value figure;
          if (const auto error = item.value().get(figure)) return JsonError(where, error);
          if (name == "parameter_bytes") {
            PIPEPLAN_ASSIGN_OR_RETURN(stage.parameter_bytes,
                                      BytesOf(where + ".parameter_bytes", figure));
          } else if (name == "gradients_held" && figure.get_bool().get(stage.gradients_held)) {
            return NotANumber(where + ".gradients_held", Written(figure), "true or false");
          }
        }
        trace->stage_parameters.push_back(stage);
        return Status::Ok();
      }));
  std::sort(trace->stage_parameters.begin(), trace->stage_parameters.end(),
            [](const TraceStageParameters& a, const TraceStageParameters& b) {
              return a.stage < b.stage;
            });
  return Status::Ok();
}

Status ReadLayerBytes(od::value value, TorchTrace* trace) {
  constexpr std::string_view kKey = "pipeplan_layers";
  od::object layers;
  if (const auto error = value.get_object().get(layers)) return JsonError(kKey, error);
  for (auto field : layers) {
    std::string_view name;
    if (const auto error = field.unescaped_key().get(name)) return JsonError(kKey, error);
    const std::string where = std::string(kKey) + "." + std::string(name.substr(0, 80));
    od::object entry;
    if (const auto error = field.value().get_object().get(entry)) return JsonError(where, error);
    TraceLayerBytes layer;
    layer.layer = std::string(name);
    for (auto item : entry) {
      std::string_view key;
      if (const auto error = item.unescaped_key().get(key)) return JsonError(where, error);
      od::value figure;
      if (const auto error = item.value().get(figure)) return JsonError(where, error);
      if (key == "parameter_bytes") {
        PIPEPLAN_ASSIGN_OR_RETURN(layer.parameter_bytes,
                                  BytesOf(where + ".parameter_bytes", figure));
      } else if (key == "output_bytes") {
        PIPEPLAN_ASSIGN_OR_RETURN(layer.output_bytes, BytesOf(where + ".output_bytes", figure));
      }
    }
    trace->layer_bytes.push_back(std::move(layer));
  }
  return Status::Ok();
}

}  // namespace pipeplan::trace_json
