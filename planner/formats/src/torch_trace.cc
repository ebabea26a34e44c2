// Reads Kineto's Chrome trace with simdjson's on-demand parser: one pass over traceEvents,
// keeping only the few events an import needs (a real job's trace is tens of megabytes).
#include "pipeplan/formats/torch_trace.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "pipeplan/formats/torch_csv.h"
#include "trace_json.h"
#include "trace_metadata.h"

namespace pipeplan {
namespace {

namespace od = simdjson::ondemand;
using trace_json::IsTruncation;
using trace_json::JsonError;
using trace_json::NotANumber;
using trace_json::NumberOf;
using trace_json::Written;

constexpr std::string_view kActionPrefix = "PP:";
constexpr std::string_view kStepPrefix = "ProfilerStep#";
constexpr std::string_view kLayerPrefix = "pipeplan.layer.";
constexpr std::string_view kLayerForward = "pipeplan.layer.forward:";
constexpr std::string_view kLayerBackward = "pipeplan.layer.backward:";

// A timestamp, exactly: traces write microseconds since boot with nanosecond decimals
// ("4793894544575.062"), past what a double holds to the nanosecond, so the whole
// microseconds are kept apart from the fraction.
struct Timestamp {
  int64_t whole = 0;
  double fraction = 0.0;
};

// The fields of one event that matter here; string views point into the parser's buffer.
struct Event {
  std::string_view ph;
  std::string_view cat;
  std::string_view name;
  int64_t tid = 0;
  std::optional<Timestamp> ts;  // metadata events have none
  double dur = 0.0;
  std::optional<int64_t> external_id;
  std::optional<int64_t> correlation;  // a launch and the kernel it launched share it
  std::optional<double> total_allocated;
  double bytes = 0.0;
  std::optional<int64_t> device_type;
  std::optional<int64_t> address;
};

// A "PP:" range before its host and device halves are joined.
struct Range {
  std::string_view name;
  int64_t event;
  int64_t tid;
  double start;
  double end;
  std::optional<int64_t> external_id;
};

// The string value after the last `"key": "` in `text` (a cut file's last event's name).
std::string LastStringValue(std::string_view text, std::string_view key) {
  const std::string pattern = "\"" + std::string(key) + "\": \"";
  const size_t at = text.rfind(pattern);
  if (at == std::string_view::npos) return "";
  const std::string_view rest = text.substr(at + pattern.size());
  return std::string(rest.substr(0, std::min(rest.find('"'), size_t{80})));
}

// What can still be said about a file that ends in the middle of its JSON: its rank (Kineto
// writes distributedInfo first) and the last event it began.
Status Truncated(std::string_view json) {
  std::string where;
  if (const size_t info = json.find("\"distributedInfo\""); info != std::string_view::npos) {
    const size_t rank = json.find("\"rank\": ", info);
    if (rank != std::string_view::npos && rank - info < 400) {
      const std::string_view digits = json.substr(rank + 8, 12);
      where =
          "rank " + std::string(digits.substr(0, digits.find_first_not_of("0123456789"))) + ", ";
    }
  }
  const std::string name = LastStringValue(json, "name");
  return InvalidArgument(
      "the file ends in the middle of its JSON (truncated?): " + where +
      (name.empty() ? "no event was complete" : "the last event begun is '" + name + "'"));
}

// Whole microseconds and the fraction in a trace's own form ("4793894544575.062"); any other
// form of a number (an exponent) through a double, which still holds it to the microsecond.
StatusOr<Timestamp> TimestampOf(od::value value) {
  const std::string_view text = Written(value);
  Timestamp ts;
  if (text.find_first_of("eE") != std::string_view::npos) {
    PIPEPLAN_ASSIGN_OR_RETURN(const double number, NumberOf("ts", value));
    if (std::fabs(number) >= 9e18) return NotANumber("ts", text, "a time in microseconds");
    ts.whole = static_cast<int64_t>(std::floor(number));
    ts.fraction = number - static_cast<double>(ts.whole);
    return ts;
  }
  const size_t point = text.find('.');
  const std::string_view whole = text.substr(0, point);
  const auto [end, error] = std::from_chars(whole.data(), whole.data() + whole.size(), ts.whole);
  if (error != std::errc() || end != whole.data() + whole.size()) {
    return NotANumber("ts", text, "a time in microseconds");
  }
  if (point != std::string_view::npos) {
    const std::string decimals = "0" + std::string(text.substr(point));
    const auto [last, bad] =
        std::from_chars(decimals.data(), decimals.data() + decimals.size(), ts.fraction);
    if (bad != std::errc() || last != decimals.data() + decimals.size()) {
      return NotANumber("ts", text, "a time in microseconds");
    }
    if (whole.starts_with('-')) ts.fraction = -ts.fraction;
  }
  return ts;
}

// Ids and counts are integers; a tid may also be a string (then 0).
StatusOr<int64_t> IdOf(std::string_view key, od::value value) {
  od::json_type type;
  if (const auto error = value.type().get(type)) return JsonError(key, error);
  if (type != od::json_type::number) return int64_t{0};
  const std::string_view written = Written(value);
  int64_t id = 0;
  if (value.get_int64().get(id)) return NotANumber(key, written, "an integer that fits 64 bits");
  return id;
}

Status ReadArgs(od::value value, Event* event) {
  od::object args;
  if (const auto error = value.get_object().get(args)) return JsonError("args", error);
  for (auto field : args) {
    std::string_view key;
    if (const auto error = field.unescaped_key().get(key)) return JsonError("args", error);
    if (key == "External id") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->external_id, IdOf("args.External id", field.value()));
    } else if (key == "correlation") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->correlation, IdOf("args.correlation", field.value()));
    } else if (key == "Total Allocated") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->total_allocated,
                                NumberOf("args.Total Allocated", field.value()));
    } else if (key == "Bytes") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->bytes, NumberOf("args.Bytes", field.value()));
    } else if (key == "Addr") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->address, IdOf("args.Addr", field.value()));
    } else if (key == "Device Type") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->device_type, IdOf("args.Device Type", field.value()));
    }
  }
  return Status::Ok();
}

Status ReadEvent(od::object object, Event* event) {
  for (auto field : object) {
    std::string_view key;
    if (const auto error = field.unescaped_key().get(key)) return JsonError("key", error);
    od::value value;
    if (const auto error = field.value().get(value)) return JsonError(key, error);
    if (key == "ph" || key == "cat" || key == "name") {
      std::string_view text;
      if (const auto error = value.get_string().get(text)) return JsonError(key, error);
      (key == "ph" ? event->ph : key == "cat" ? event->cat : event->name) = text;
    } else if (key == "ts") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->ts, TimestampOf(value));
    } else if (key == "dur") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->dur, NumberOf("dur", value));
    } else if (key == "tid") {
      PIPEPLAN_ASSIGN_OR_RETURN(event->tid, IdOf("tid", value));
    } else if (key == "args") {
      PIPEPLAN_RETURN_IF_ERROR(ReadArgs(value, event));
    }
  }
  return Status::Ok();
}

// What one pass over traceEvents keeps.
struct Collected {
  std::vector<Range> host;        // "PP:" user_annotation ranges
  std::vector<Range> layer_host;  // "pipeplan.layer." user_annotation ranges
  std::vector<Range> device;      // both kinds' gpu_user_annotation ranges
  std::unordered_map<int64_t, std::vector<double>> op_starts;  // cpu_op starts per thread
  // Kernel launches (any thread: autograd runs backward on threads of its own) and the device
  // work they started, joined by correlation id.
  std::vector<std::pair<double, int64_t>> launches;                // (ts, correlation)
  std::unordered_map<int64_t, std::pair<double, double>> kernels;  // correlation -> span
  std::vector<TraceStep> steps;
  std::vector<TraceMemory> memory;
  std::optional<int64_t> origin;  // the first event's whole microsecond
};

std::string EventName(int64_t index, std::string_view name) {
  return "event " + std::to_string(index) + (name.empty() ? "" : " (" + std::string(name) + ")");
}

Status Keep(const Event& e, int64_t index, Collected* out) {
  if (!e.ts.has_value()) return Status::Ok();
  // Times relative to the first event's whole microsecond (TorchTrace::origin_microseconds).
  if (!out->origin.has_value()) out->origin = e.ts->whole;
  const double ts = static_cast<double>(e.ts->whole - *out->origin) + e.ts->fraction;
  const bool layer = e.name.starts_with(kLayerPrefix);
  if (e.ph == "X" && (layer || e.name.starts_with(kActionPrefix)) &&
      (e.cat == "user_annotation" || e.cat == "gpu_user_annotation")) {
    if (!(e.dur >= 0.0)) return InvalidArgument(EventName(index, e.name) + ": negative dur");
    Range range{e.name, index, e.tid, ts, ts + e.dur, e.external_id};
    if (e.cat == "gpu_user_annotation") {
      out->device.push_back(range);
    } else {
      (layer ? out->layer_host : out->host).push_back(range);
    }
  } else if (e.ph == "X" && e.cat == "cpu_op") {
    out->op_starts[e.tid].push_back(ts);
  } else if (e.ph == "X" && (e.cat == "cuda_runtime" || e.cat == "cuda_driver") &&
             e.correlation.has_value()) {
    out->launches.emplace_back(ts, *e.correlation);
  } else if (e.ph == "X" && (e.cat == "kernel" || e.cat == "gpu_memcpy" || e.cat == "gpu_memset") &&
             e.correlation.has_value()) {
    out->kernels[*e.correlation] = {ts, ts + e.dur};
  } else if (e.ph == "X" && e.cat == "user_annotation" && e.name.starts_with(kStepPrefix)) {
    int number = 0;
    const std::string_view digits = e.name.substr(kStepPrefix.size());
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error != std::errc() || end != digits.data() + digits.size()) {
      return InvalidArgument(EventName(index, e.name) + ": not a step number");
    }
    out->steps.push_back({number, ts, ts + e.dur});
  } else if (e.name == "[memory]" && e.total_allocated.has_value()) {
    out->memory.push_back({.time = ts,
                           .allocated = *e.total_allocated,
                           .bytes = e.bytes,
                           .device = e.device_type.value_or(0) == 1,
                           .address = e.address});
  }
  return Status::Ok();
}

Status ReadEvents(od::value value, std::string_view json, Collected* out) {
  od::array events;
  if (const auto error = value.get_array().get(events)) {
    return JsonError("traceEvents is not an array", error);
  }
  int64_t index = 0;
  for (auto element : events) {
    od::object object;
    if (const auto error = element.get_object().get(object)) {
      if (IsTruncation(error)) return Truncated(json);
      return JsonError(
          "traceEvents: malformed or truncated after event " + std::to_string(index - 1), error);
    }
    Event event;
    if (Status read = ReadEvent(object, &event); !read.ok()) {
      return InvalidArgument(EventName(index, event.name) + ": " + read.message());
    }
    PIPEPLAN_RETURN_IF_ERROR(Keep(event, index, out));
    ++index;
  }
  return Status::Ok();
}

Status ReadDistributedInfo(od::value value, TorchTrace* trace) {
  od::object info;
  if (const auto error = value.get_object().get(info)) return JsonError("distributedInfo", error);
  for (auto field : info) {
    std::string_view key;
    if (const auto error = field.unescaped_key().get(key))
      return JsonError("distributedInfo", error);
    if (key == "rank" || key == "world_size") {
      PIPEPLAN_ASSIGN_OR_RETURN(const int64_t number, IdOf(key, field.value()));
      (key == "rank" ? trace->rank : trace->world_size) = static_cast<int>(number);
    } else if (key == "backend") {
      std::string_view text;
      if (const auto error = field.value().get_string().get(text)) {
        return JsonError("distributedInfo.backend", error);
      }
      trace->backend = std::string(text);
    }
  }
  return Status::Ok();
}

// The first operator that starts inside [range.start, range.end] on the range's thread; the
// range's end when none does.
double WorkStart(const Range& range, const Collected& collected) {
  const auto ops = collected.op_starts.find(range.tid);
  if (ops == collected.op_starts.end()) return range.end;
  const auto first = std::lower_bound(ops->second.begin(), ops->second.end(), range.start);
  return first != ops->second.end() && *first <= range.end ? *first : range.end;
}

// The device work launched while `range` ran (from any thread of the process): the first
// kernel's start to the last one's end; nullopt when it launched none.
std::optional<std::pair<double, double>> LaunchedWork(const Range& range,
                                                      const Collected& collected) {
  std::optional<std::pair<double, double>> span;
  auto it = std::lower_bound(collected.launches.begin(), collected.launches.end(),
                             std::pair<double, int64_t>(range.start, INT64_MIN));
  for (; it != collected.launches.end() && it->first <= range.end; ++it) {
    const auto kernel = collected.kernels.find(it->second);
    if (kernel == collected.kernels.end()) continue;
    if (!span.has_value()) {
      span = kernel->second;
    } else {
      span->first = std::min(span->first, kernel->second.first);
      span->second = std::max(span->second, kernel->second.second);
    }
  }
  return span;
}

// Sorts what was collected in the order the lookups below need.
void SortCollected(Collected& collected) {
  for (auto& [tid, starts] : collected.op_starts) std::sort(starts.begin(), starts.end());
  std::sort(collected.launches.begin(), collected.launches.end());
  const auto by_start = [](const Range& a, const Range& b) { return a.start < b.start; };
  std::stable_sort(collected.host.begin(), collected.host.end(), by_start);
  std::stable_sort(collected.layer_host.begin(), collected.layer_host.end(), by_start);
  std::stable_sort(collected.device.begin(), collected.device.end(), by_start);
}

// A host range's device span: what its gpu_user_annotation (same External id, else the same
// name in the same order) and the kernels launched while it ran cover together. Asked for
// each host range in start order.
class DeviceSpans {
 public:
  explicit DeviceSpans(const Collected& collected) : collected_(collected) {
    for (const Range& range : collected.device) {
      if (range.external_id.has_value()) by_id_[*range.external_id] = &range;
      by_name_[range.name].push_back(&range);
    }
  }

  std::optional<std::pair<double, double>> Of(const Range& range) {
    const Range* device = nullptr;
    if (range.external_id.has_value()) {
      if (auto it = by_id_.find(*range.external_id);
          it != by_id_.end() && it->second->name == range.name) {
        device = it->second;
      }
    }
    const size_t nth = seen_[range.name]++;
    if (device == nullptr && by_id_.empty()) {
      const auto& same = by_name_[range.name];
      if (nth < same.size()) device = same[nth];
    }
    std::optional<std::pair<double, double>> span = LaunchedWork(range, collected_);
    if (device != nullptr) {
      span = span.has_value() ? std::pair(std::min(span->first, device->start),
                                          std::max(span->second, device->end))
                              : std::pair(device->start, device->end);
    }
    return span;
  }

 private:
  const Collected& collected_;
  std::map<int64_t, const Range*> by_id_;
  std::map<std::string_view, std::vector<const Range*>> by_name_;
  std::map<std::string_view, size_t> seen_;
};

// Parses each host range's token and gives it its device span.
Status BuildActions(const Collected& collected, TorchTrace* trace) {
  DeviceSpans spans(collected);
  for (const Range& range : collected.host) {
    const std::string_view token = range.name.substr(kActionPrefix.size());
    const StatusOr<std::optional<Action>> parsed = ParseTorchActionToken(token);
    if (!parsed.ok()) {
      return InvalidArgument(EventName(range.event, range.name) +
                             ": unknown action token: " + parsed.status().message());
    }
    if (!parsed->has_value()) {
      ++trace->skipped_bookkeeping;
      continue;
    }
    TraceAction action;
    action.action = **parsed;
    action.token = std::string(token);
    action.event = range.event;
    action.start = range.start;
    action.end = range.end;
    action.work_start = WorkStart(range, collected);
    if (const auto span = spans.Of(range); span.has_value()) {
      action.device_start = span->first;
      action.device_end = span->second;
    }
    trace->actions.push_back(std::move(action));
  }
  return Status::Ok();
}

// Each "pipeplan.layer." host range: forward or backward, the layer's name, its device span.
Status BuildLayerRanges(const Collected& collected, TorchTrace* trace) {
  DeviceSpans spans(collected);
  for (const Range& range : collected.layer_host) {
    TraceLayerRange layer;
    layer.event = range.event;
    layer.start = range.start;
    layer.end = range.end;
    if (range.name.starts_with(kLayerForward)) {
      layer.layer = std::string(range.name.substr(kLayerForward.size()));
    } else if (range.name.starts_with(kLayerBackward)) {
      layer.backward = true;
      layer.layer = std::string(range.name.substr(kLayerBackward.size()));
    } else {
      return InvalidArgument(EventName(range.event, range.name) +
                             ": expected pipeplan.layer.forward:<name> or "
                             "pipeplan.layer.backward:<name>");
    }
    if (layer.layer.empty()) {
      return InvalidArgument(EventName(range.event, range.name) + ": the layer has no name");
    }
    if (const auto span = spans.Of(range); span.has_value()) {
      layer.device_start = span->first;
      layer.device_end = span->second;
    }
    trace->layer_ranges.push_back(std::move(layer));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TorchTrace> ParseTorchTrace(std::string_view json, TraceContent content) {
  // A byte order mark is not JSON, but editors write one.
  if (json.starts_with("\xEF\xBB\xBF")) json.remove_prefix(3);
  od::parser parser;
  const simdjson::padded_string padded(json.data(), json.size());
  od::document document;
  if (const auto error = parser.iterate(padded).get(document)) {
    return IsTruncation(error) ? Truncated(json) : JsonError("not a JSON Chrome trace", error);
  }
  od::object root;
  if (const auto error = document.get_object().get(root)) {
    if (IsTruncation(error)) return Truncated(json);
    return JsonError("not a JSON Chrome trace (expected an object with traceEvents)", error);
  }
  TorchTrace trace;
  Collected collected;
  bool has_events = false;
  for (auto field : root) {
    std::string_view key;
    if (const auto error = field.unescaped_key().get(key)) {
      return JsonError("not a JSON Chrome trace", error);
    }
    od::value value;
    if (const auto error = field.value().get(value)) return JsonError(key, error);
    if (key == "traceEvents") {
      has_events = true;
      PIPEPLAN_RETURN_IF_ERROR(ReadEvents(value, json, &collected));
    } else if (key == "distributedInfo") {
      PIPEPLAN_RETURN_IF_ERROR(ReadDistributedInfo(value, &trace));
    } else if (key == "baseTimeNanoseconds") {
      PIPEPLAN_ASSIGN_OR_RETURN(trace.base_nanoseconds, IdOf(key, value));
    } else if (key == "pipeplan_live_bytes") {
      PIPEPLAN_RETURN_IF_ERROR(trace_json::ReadLiveBytes(value, &trace));
    } else if (key == "pipeplan_stages") {
      PIPEPLAN_RETURN_IF_ERROR(trace_json::ReadStageParameters(value, &trace));
    } else if (key == "pipeplan_layers") {
      PIPEPLAN_RETURN_IF_ERROR(trace_json::ReadLayerBytes(value, &trace));
    }
  }
  if (!has_events) return InvalidArgument("no traceEvents: not a torch.profiler Chrome trace");
  if (content == TraceContent::kLayers && collected.layer_host.empty()) {
    return InvalidArgument(
        "no 'pipeplan.layer.' ranges: mark the job's layers with python/pipeplan_profiler.py "
        "(profile_steps(..., layers=model), or mark_layers(model) under your own profiler)");
  }
  if (content == TraceContent::kActions && collected.host.empty()) {
    return InvalidArgument(
        "no 'PP:' action ranges: was the job run by torch.distributed.pipelining's schedule "
        "(2.6 or later) under torch.profiler? (torch's Schedule1F1B and ScheduleGPipe mark no "
        "actions: profile them with python/pipeplan_profiler.py's "
        "profile_steps(..., schedule=schedule))");
  }
  SortCollected(collected);
  PIPEPLAN_RETURN_IF_ERROR(BuildActions(collected, &trace));
  PIPEPLAN_RETURN_IF_ERROR(BuildLayerRanges(collected, &trace));
  trace.origin_microseconds = collected.origin.value_or(0);
  std::sort(collected.steps.begin(), collected.steps.end(),
            [](const TraceStep& a, const TraceStep& b) { return a.start < b.start; });
  trace.steps = std::move(collected.steps);
  std::stable_sort(collected.memory.begin(), collected.memory.end(),
                   [](const TraceMemory& a, const TraceMemory& b) { return a.time < b.time; });
  trace.memory = std::move(collected.memory);
  return trace;
}

}  // namespace pipeplan
