#include "pipeplan/app/request_flags.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pipeplan/app/format.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/plannable.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::app {
namespace {

// The durations by flag name, in the order they are checked; `Values` is RequestValues or
// const RequestValues.
template <typename Values>
auto Durations(Values& values) {
  using Field = decltype(&values.forward);
  return std::array<std::pair<std::string_view, Field>, 7>{{
      {"forward", &values.forward},
      {"backward", &values.backward},
      {"backward-input", &values.backward_input},
      {"backward-weight", &values.backward_weight},
      {"overlap", &values.overlap},
      {"comm", &values.comm},
      {"receive-overhead", &values.receive_overhead},
  }};
}

// A count (>= 1) that must fit an int.
StatusOr<std::optional<int>> CheckCount(std::string_view name, std::optional<int64_t> value) {
  if (!value.has_value()) return std::optional<int>();
  if (*value < 1) {
    return InvalidArgument("--" + std::string(name) + " must be >= 1, got " +
                           std::to_string(*value));
  }
  if (*value > std::numeric_limits<int>::max()) {
    return InvalidArgument("--" + std::string(name) + ": integer out of range: '" +
                           std::to_string(*value) + "'");
  }
  return std::optional<int>(static_cast<int>(*value));
}

StatusOr<int> RequireCount(std::string_view name, std::optional<int64_t> value) {
  if (!value.has_value()) return InvalidArgument("missing required flag --" + std::string(name));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> count, CheckCount(name, value));
  return *count;
}

Status CheckNonNegative(std::string_view name, std::optional<double> value) {
  if (!value.has_value() || (std::isfinite(*value) && *value >= 0)) return Status::Ok();
  if (std::isfinite(*value)) {
    return InvalidArgument("--" + std::string(name) + " must be >= 0, got " + FormatNumber(*value));
  }
  return InvalidArgument("--" + std::string(name) + ": expected a number, got '" +
                         FormatNumber(*value) + "'");
}

// The first value given besides --request, in the order `pipeplan plan --help` lists them.
std::optional<std::string_view> FirstRequestValue(const RequestValues& values) {
  const std::pair<std::string_view, bool> given[] = {
      {"strategy", values.strategy.has_value()},
      {"ranks", values.ranks.has_value()},
      {"microbatches", values.microbatches.has_value()},
      {"stages-per-rank", values.stages_per_rank.has_value()},
      {"microbatch-group-size", values.microbatch_group_size.has_value()},
      {"memory-limit", values.memory_limit.has_value()},
      {"post-validation", values.post_validation},
      {"runtime", values.runtime.has_value()},
      {"costs", values.costs_file.has_value() || values.costs_model.has_value()}};
  for (const auto& [name, is_given] : given) {
    if (is_given) return name;
  }
  for (const auto& [name, value] : Durations(values)) {
    if (value->has_value()) return name;
  }
  return std::nullopt;
}

StatusOr<CostFlags> CheckCostValues(const RequestValues& values) {
  CostFlags out;
  out.costs_file = values.costs_file;
  out.costs_model = values.costs_model;
  const bool costs_given = out.costs_file.has_value() || out.costs_model.has_value();
  bool any_duration = false;
  for (const auto& [name, value] : Durations(values)) {
    PIPEPLAN_RETURN_IF_ERROR(CheckNonNegative(name, *value));
    any_duration = any_duration || value->has_value();
  }
  // The cost model reads an overlap of 0 as "F + B", so 0 cannot be given.
  if (values.overlap.has_value() && *values.overlap == 0) {
    return InvalidArgument("--overlap must be > 0, got " + FormatNumber(*values.overlap) +
                           " (leave it out for F + B)");
  }
  if (costs_given && any_duration) {
    return InvalidArgument(
        "--costs cannot be combined with --forward, --backward, --backward-input, "
        "--backward-weight, --overlap, --comm or --receive-overhead");
  }
  out.any_given = costs_given || any_duration;

  const StageCosts defaults;
  StageCosts stage;
  stage.forward = values.forward.value_or(defaults.forward);
  std::optional<double> input = values.backward_input;
  std::optional<double> weight = values.backward_weight;
  if (values.backward.has_value()) {
    const double b = *values.backward;
    if (input.has_value() && *input > b) {
      return InvalidArgument("--backward-input (" + FormatNumber(*input) +
                             ") cannot exceed --backward (" + FormatNumber(b) +
                             ") when --backward-weight is not given");
    }
    if (weight.has_value() && *weight > b && !input.has_value()) {
      return InvalidArgument("--backward-weight (" + FormatNumber(*weight) +
                             ") cannot exceed --backward (" + FormatNumber(b) +
                             ") when --backward-input is not given");
    }
    if (!input.has_value() && !weight.has_value()) {
      // B alone says nothing of its split: I and W are assumed, and advice resting on them
      // (auto's pick, compare's rows) says so (figure_sources.h).
      input = b / 2;
      weight = b / 2;
      out.from_flags.sources = {StageSources{}};
      out.from_flags.sources.front().AssumeSplit();
    } else if (!input.has_value()) {
      input = b - *weight;
    } else if (!weight.has_value()) {
      weight = b - *input;
    }
    stage.backward = b;
  } else {
    input = input.value_or(defaults.backward_input);
    weight = weight.value_or(defaults.backward_weight);
    stage.backward = *input + *weight;
  }
  stage.backward_input = *input;
  stage.backward_weight = *weight;
  stage.overlap = values.overlap.value_or(0.0);  // 0: an F&B cell costs F + B
  out.from_flags.stages = {stage};
  BoundaryCosts boundary;
  boundary.latency = values.comm.value_or(0.0);
  boundary.receive_overhead = values.receive_overhead.value_or(0.0);
  out.from_flags.boundaries = {boundary};
  return out;
}

}  // namespace

StatusOr<CostFlags> ParseCostFlags(const Flags& flags) {
  PIPEPLAN_ASSIGN_OR_RETURN(const RequestValues values, ReadRequestValues(flags));
  return CheckCostValues(values);
}

std::vector<FlagSpec> CostFlagSpecs() {
  return {{"costs"},           {"forward"}, {"backward"}, {"backward-input"},
          {"backward-weight"}, {"overlap"}, {"comm"},     {"receive-overhead"}};
}

std::vector<FlagSpec> TopologyFlagSpecs() {
  return {{"ranks"},           {"microbatches"},
          {"stages-per-rank"}, {"microbatch-group-size"},
          {"memory-limit"},    {"post-validation", FlagKind::kBool},
          {"runtime"}};
}

StatusOr<CostModel> LoadCosts(const CostFlags& flags) {
  if (flags.costs_model.has_value()) return *flags.costs_model;
  if (!flags.costs_file.has_value()) return flags.from_flags;
  return LoadProtoFile(*flags.costs_file, FileKind::kCostModel, ParseCostModel);
}

StatusOr<MemoryAmount> ParseMemoryAmount(std::string_view text, std::string_view flag) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"B", 1.0},  {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40},
      {"KB", 1e3}, {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
  const std::string whole(text);
  const char* begin = whole.data();
  const char* end = begin + whole.size();
  if (begin != end && *begin == '+') ++begin;
  double value = 0.0;
  const auto [number_end, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || !std::isfinite(value)) {
    return InvalidArgument(std::string(flag) + ": expected a number, optionally with a unit " +
                           "(70GiB, 512MiB), got '" + whole + "'");
  }
  std::string_view unit(number_end, static_cast<size_t>(end - number_end));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (unit.empty()) return MemoryAmount{value, false};
  const auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  };
  // The binary units in any case ("12mib"); the decimal ones as written, since "Gb" reads as
  // gigabits.
  for (const auto& [name, bytes] : kUnits) {
    const bool binary = name.size() == 3 && name[1] == 'i';
    if (unit == name || (binary && same(unit, name))) return MemoryAmount{value * bytes, true};
  }
  if (unit.size() == 1 && std::string_view("KkMmGgTt").find(unit.front()) != std::string::npos) {
    const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(unit.front())));
    return InvalidArgument(std::string(flag) + ": '" + whole + "' is ambiguous: " + up +
                           "iB (powers of 1024) or " + up + "B (powers of 1000)?");
  }
  return InvalidArgument(std::string(flag) + ": unknown unit '" + std::string(unit) + "' in '" +
                         whole + "' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; or a plain number " +
                         "in the memory model's unit)");
}

StatusOr<MemoryAmount> ParseMemoryLimit(std::string_view text, std::string_view flag) {
  if (text.find(',') != std::string_view::npos) {
    return InvalidArgument(std::string(flag) + ": one limit for every rank here, got the list '" +
                           std::string(text) + "' (a limit per rank is for pipeplan partition)");
  }
  return ParseMemoryAmount(text, flag);
}

StatusOr<std::vector<double>> ParseMemoryLimits(std::string_view text, std::string_view flag) {
  std::vector<double> limits;
  const bool listed = text.find(',') != std::string_view::npos;
  size_t from = 0;
  for (;;) {
    const size_t comma = text.find(',', from);
    std::string_view item =
        text.substr(from, comma == std::string_view::npos ? text.size() - from : comma - from);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const std::string where =
        std::string(flag) + (listed ? " (rank " + std::to_string(limits.size()) + ")" : "");
    PIPEPLAN_ASSIGN_OR_RETURN(const MemoryAmount amount, ParseMemoryAmount(item, where));
    if (!(amount.value > 0)) {
      return InvalidArgument(where + " must be > 0 bytes, got '" + std::string(item) + "'");
    }
    limits.push_back(amount.value);
    if (comma == std::string_view::npos) return limits;
    from = comma + 1;
  }
}

StatusOr<Runtime> ParseRuntimeFlag(std::string_view name) {
  const std::optional<Runtime> runtime = RuntimeFromName(name);
  if (!runtime.has_value()) {
    return InvalidArgument("--runtime: unknown runtime '" + std::string(name) +
                           "' (known: " + std::string(RuntimeNames()) + ")");
  }
  return *runtime;
}

StatusOr<RequestValues> ReadRequestValues(const Flags& flags) {
  RequestValues values;
  values.request_file = flags.GetString("request");
  values.strategy = flags.GetString("strategy");
  const std::pair<std::string_view, std::optional<int64_t>*> counts[] = {
      {"ranks", &values.ranks},
      {"microbatches", &values.microbatches},
      {"stages-per-rank", &values.stages_per_rank},
      {"microbatch-group-size", &values.microbatch_group_size}};
  for (const auto& [name, value] : counts) {
    PIPEPLAN_ASSIGN_OR_RETURN(*value, flags.GetInteger(name));
  }
  if (const std::optional<std::string> limit = flags.GetString("memory-limit")) {
    PIPEPLAN_ASSIGN_OR_RETURN(const MemoryAmount amount,
                              ParseMemoryLimit(*limit, "--memory-limit"));
    values.memory_limit = amount.value;
    values.memory_limit_in_bytes = amount.bytes;
  }
  for (const auto& [name, value] : Durations(values)) {
    PIPEPLAN_ASSIGN_OR_RETURN(*value, flags.GetNumber(name));
  }
  values.post_validation = flags.GetBool("post-validation");
  values.runtime = flags.GetString("runtime");
  values.costs_file = flags.GetString("costs");
  return values;
}

StatusOr<RequestFlags> CheckRequestValues(const RequestValues& values, StrategyFlag strategy_flag) {
  RequestFlags out;
  out.request_file = values.request_file;
  if (out.request_file.has_value()) {
    if (const std::optional<std::string_view> other = FirstRequestValue(values)) {
      return InvalidArgument("--request cannot be combined with --" + std::string(*other) +
                             " (the file holds the whole request)");
    }
    return out;
  }
  if (strategy_flag == StrategyFlag::kRequired) {
    if (!values.strategy.has_value()) return InvalidArgument("missing required flag --strategy");
    out.strategy = *values.strategy;
    if (out.strategy != kAutoStrategy && !FindPlannableStrategy(out.strategy).has_value()) {
      return InvalidArgument("unknown strategy '" + out.strategy +
                             "' (known: " + PlannableStrategyNames() + ")");
    }
  }
  PIPEPLAN_ASSIGN_OR_RETURN(out.ranks, RequireCount("ranks", values.ranks));
  PIPEPLAN_ASSIGN_OR_RETURN(out.microbatches, RequireCount("microbatches", values.microbatches));
  PIPEPLAN_ASSIGN_OR_RETURN(out.stages_per_rank,
                            CheckCount("stages-per-rank", values.stages_per_rank));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> group,
                            CheckCount("microbatch-group-size", values.microbatch_group_size));
  out.microbatch_group_size = group.value_or(0);
  if (out.strategy == kAutoStrategy && group.has_value()) {
    return InvalidArgument(
        "--microbatch-group-size does not apply to --strategy auto (auto tries the group sizes "
        "itself)");
  }
  out.post_validation = values.post_validation;
  if (values.runtime.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(out.runtime, ParseRuntimeFlag(*values.runtime));
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckNonNegative("memory-limit", values.memory_limit));
  out.memory_limit = values.memory_limit;
  out.memory_limit_in_bytes = values.memory_limit_in_bytes;
  PIPEPLAN_ASSIGN_OR_RETURN(out.costs, CheckCostValues(values));
  return out;
}

std::string InFlagTerms(std::string message, const RequestFlags& flags) {
  struct FlagOfField {
    std::string_view field;
    std::string_view flag;
    bool request_field;  // a request file's field, named as such when a file gave the request
  };
  static constexpr std::array<FlagOfField, 8> kFlagOfField = {{
      {"topology.ranks", "--ranks", true},
      {"topology.microbatches", "--microbatches", true},
      {"topology.stages_per_rank", "--stages-per-rank", true},
      {"options.microbatch_group_size", "--microbatch-group-size", true},
      {"options.post_validation", "--post-validation", true},
      {"memory.limit", "--memory-limit", true},
      {"time_limit_s", "--time-limit", false},  // PlanOptions', always a flag
      {"with_solver", "--optimal", false},
  }};
  // A field's name ends where no letter, digit, '_' or '.' + name continues it.
  const auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  const auto continues = [&](size_t at) {
    if (at >= message.size()) return false;
    if (is_name(message[at])) return true;
    return message[at] == '.' && at + 1 < message.size() && is_name(message[at + 1]);
  };
  for (const auto& [field, flag, request_field] : kFlagOfField) {
    if (request_field && flags.request_file.has_value()) continue;
    for (size_t at = message.find(field); at != std::string::npos;
         at = message.find(field, at + 1)) {
      const bool starts = at == 0 || !(is_name(message[at - 1]) || message[at - 1] == '.');
      if (!starts || continues(at + field.size())) continue;
      message.replace(at, field.size(), flag);
    }
  }
  return message;
}

Status InFlagTerms(const Status& status, const RequestFlags& flags) {
  if (status.ok()) return status;
  return {status.code(), InFlagTerms(status.message(), flags)};
}

StatusOr<RequestFlags> ParseRequestFlags(const Flags& flags, StrategyFlag strategy_flag) {
  PIPEPLAN_ASSIGN_OR_RETURN(const RequestValues values, ReadRequestValues(flags));
  return CheckRequestValues(values, strategy_flag);
}

Status CheckTimeLimit(double seconds, std::string_view name) {
  if (seconds > 0 && std::isfinite(seconds)) return Status::Ok();
  return InvalidArgument(std::string(name) + " must be a number of seconds > 0, got " +
                         FormatCompact(seconds));
}

StatusOr<std::optional<double>> ParseTimeLimitFlag(const Flags& flags) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> seconds, flags.GetNumber("time-limit"));
  if (seconds.has_value()) PIPEPLAN_RETURN_IF_ERROR(CheckTimeLimit(*seconds, "--time-limit"));
  return seconds;
}

StatusOr<PlanRequest> LoadRequest(const RequestFlags& flags) {
  if (flags.request_file.has_value()) {
    return LoadProtoFile(*flags.request_file, FileKind::kRequest, ParseRequest);
  }
  PlanRequest request;
  request.strategy = flags.strategy;
  request.topology.ranks = flags.ranks;
  request.topology.microbatches = flags.microbatches;
  request.topology.stages_per_rank = flags.stages_per_rank.value_or(1);
  if (const std::optional<PlannableStrategy> strategy = FindPlannableStrategy(flags.strategy)) {
    request.topology.placement = strategy->placement;
    if (!flags.stages_per_rank.has_value()) {
      request.topology.stages_per_rank = std::max(1, strategy->min_stages_per_rank);
    }
  }
  request.options.microbatch_group_size = flags.microbatch_group_size;
  request.options.post_validation = flags.post_validation;
  request.runtime = flags.runtime;
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, LoadCosts(flags.costs));
  // A calibrated cost file brings the memory model (in bytes) with it.
  TakeMemoryFromCosts(request);
  // --memory-limit overrides a cost file's own limit; without it the file's holds.
  if (flags.memory_limit.has_value()) request.memory.limit = flags.memory_limit;
  if (flags.memory_limit_in_bytes && request.memory.unit != MemoryUnit::kBytes) {
    return InvalidArgument(
        "--memory-limit " + FormatBytes(*flags.memory_limit) +
        " is in bytes, but the memory model counts microbatch activations: give a cost file "
        "with memory in bytes (--costs, from 'pipeplan calibrate' of a profile that counted "
        "bytes: a pipeplan-torch run, or torch.profiler traces imported with "
        "profile_memory=True), or the limit as a plain number of activations");
  }
  return request;
}

StatusOr<Plan> ReadPlanFile(const std::string& path) {
  return LoadProtoFile(path, FileKind::kPlan, ParsePlan);
}

StatusOr<Plan> LoadPlanFile(const std::string& path) {
  PIPEPLAN_ASSIGN_OR_RETURN(Plan plan, ReadPlanFile(path));
  // Files come from anywhere (other tools, hand edits): check them like imported plans.
  if (Status status = ValidatePlan(plan); !status.ok()) return status.WithContext(path);
  return plan;
}

}  // namespace pipeplan::app
