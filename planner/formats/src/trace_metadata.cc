#include "trace_metadata.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

namespace pipeplan::trace_json {
namespace {

// Calls read(key, value) for each field of the object `value`, named `where` in errors.
template <typename Read>
Status ForEachField(od::value value, std::string_view where, Read read) {
  od::object fields;
  if (const auto error = value.get_object().get(fields)) return JsonError(where, error);
  for (auto field : fields) {
    std::string_view key;
    if (const auto error = field.unescaped_key().get(key)) return JsonError(where, error);
    od::value item;
    if (const auto error = field.value().get(item)) return JsonError(where, error);
    PIPEPLAN_RETURN_IF_ERROR(read(key, item));
  }
  return Status::Ok();
}

// pipeplan_profiler.py's metadata `key`: an object whose keys are whole numbers >= 0 (step
// numbers, stage indices; `what` names them in errors). Calls read(number, where, value) for
// each entry, `where` naming it ("key.12").
template <typename Read>
Status ReadNumberedEntries(od::value value, std::string_view key, std::string_view what,
                           Read read) {
  return ForEachField(value, key, [&](std::string_view name, od::value entry) -> Status {
    const std::string where = std::string(key) + "." + std::string(name.substr(0, 40));
    int number = 0;
    const auto [end, bad] = std::from_chars(name.data(), name.data() + name.size(), number);
    if (bad != std::errc() || end != name.data() + name.size() || number < 0) {
      return InvalidArgument(where + ": the key is not " + std::string(what));
    }
    return read(number, where, entry);
  });
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
        // Not through PIPEPLAN_RETURN_IF_ERROR: the call around this lambda is one already.
        Status fields =
            ForEachField(figures, where, [&](std::string_view name, od::value figure) -> Status {
              if (name == "parameter_bytes") {
                PIPEPLAN_ASSIGN_OR_RETURN(stage.parameter_bytes,
                                          BytesOf(where + ".parameter_bytes", figure));
              } else if (name == "gradients_held" && figure.get_bool().get(stage.gradients_held)) {
                return NotANumber(where + ".gradients_held", Written(figure), "true or false");
              }
              return Status::Ok();
            });
        if (!fields.ok()) return fields;
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
  return ForEachField(value, kKey, [&](std::string_view name, od::value figures) -> Status {
    const std::string where = std::string(kKey) + "." + std::string(name.substr(0, 80));
    TraceLayerBytes layer;
    layer.layer = std::string(name);
    PIPEPLAN_RETURN_IF_ERROR(
        ForEachField(figures, where, [&](std::string_view key, od::value figure) -> Status {
          if (key == "parameter_bytes") {
            PIPEPLAN_ASSIGN_OR_RETURN(layer.parameter_bytes,
                                      BytesOf(where + ".parameter_bytes", figure));
          } else if (key == "output_bytes") {
            PIPEPLAN_ASSIGN_OR_RETURN(layer.output_bytes, BytesOf(where + ".output_bytes", figure));
          }
          return Status::Ok();
        }));
    trace->layer_bytes.push_back(std::move(layer));
    return Status::Ok();
  });
}

}  // namespace pipeplan::trace_json
