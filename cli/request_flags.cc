#include "request_flags.h"

#include <algorithm>

#include "files.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/proto_io.h"
#include "pipeplan/planner/strategy.h"
#include "pipeplan/planner/validator.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kDurationFlags[] = {"forward",         "backward", "backward-input",
                                               "backward-weight", "overlap",  "comm",
                                               "receive-overhead"};
constexpr std::string_view kTopologyFlags[] = {"strategy",
                                               "ranks",
                                               "microbatches",
                                               "stages-per-rank",
                                               "microbatch-group-size",
                                               "memory-limit",
                                               "post-validation",
                                               "costs",
                                               "forward",
                                               "backward",
                                               "backward-input",
                                               "backward-weight",
                                               "overlap",
                                               "comm",
                                               "receive-overhead"};

}  // namespace

std::vector<FlagSpec> CostFlagSpecs() {
  return {{"costs"},           {"forward"}, {"backward"}, {"backward-input"},
          {"backward-weight"}, {"overlap"}, {"comm"},     {"receive-overhead"}};
}

std::vector<FlagSpec> TopologyFlagSpecs() {
  return {{"ranks"},           {"microbatches"},
          {"stages-per-rank"}, {"microbatch-group-size"},
          {"memory-limit"},    {"post-validation", FlagKind::kBool}};
}

StatusOr<CostFlags> ParseCostFlags(const Flags& flags) {
  CostFlags out;
  out.costs_file = flags.GetString("costs");
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> forward,
                            flags.GetNonNegativeDouble("forward"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> backward,
                            flags.GetNonNegativeDouble("backward"));
  PIPEPLAN_ASSIGN_OR_RETURN(std::optional<double> input,
                            flags.GetNonNegativeDouble("backward-input"));
  PIPEPLAN_ASSIGN_OR_RETURN(std::optional<double> weight,
                            flags.GetNonNegativeDouble("backward-weight"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> overlap,
                            flags.GetNonNegativeDouble("overlap"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> comm, flags.GetNonNegativeDouble("comm"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> receive_overhead,
                            flags.GetNonNegativeDouble("receive-overhead"));
  // The cost model reads an overlap of 0 as "F + B", so 0 cannot be given.
  if (overlap.has_value() && *overlap == 0) {
    return InvalidArgument("--overlap must be > 0, got " + flags.GetString("overlap").value() +
                           " (leave it out for F + B)");
  }

  bool any_duration = false;
  for (const std::string_view name : kDurationFlags) any_duration = any_duration || flags.Has(name);
  if (out.costs_file.has_value() && any_duration) {
    return InvalidArgument(
        "--costs cannot be combined with --forward, --backward, --backward-input, "
        "--backward-weight, --overlap, --comm or --receive-overhead");
  }
  out.any_given = out.costs_file.has_value() || any_duration;

  const StageCosts defaults;
  StageCosts stage;
  stage.forward = forward.value_or(defaults.forward);
  if (backward.has_value()) {
    const double b = *backward;
    if (input.has_value() && *input > b) {
      return InvalidArgument("--backward-input (" + flags.GetString("backward-input").value() +
                             ") cannot exceed --backward (" + flags.GetString("backward").value() +
                             ") when --backward-weight is not given");
    }
    if (weight.has_value() && *weight > b && !input.has_value()) {
      return InvalidArgument("--backward-weight (" + flags.GetString("backward-weight").value() +
                             ") cannot exceed --backward (" + flags.GetString("backward").value() +
                             ") when --backward-input is not given");
    }
    if (!input.has_value() && !weight.has_value()) {
      input = b / 2;
      weight = b / 2;
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
  stage.overlap = overlap.value_or(0.0);  // 0: an F&B cell costs F + B
  out.from_flags.stages = {stage};
  BoundaryCosts boundary;
  boundary.latency = comm.value_or(0.0);
  boundary.receive_overhead = receive_overhead.value_or(0.0);
  out.from_flags.boundaries = {boundary};
  return out;
}

StatusOr<CostModel> LoadCosts(const CostFlags& flags) {
  if (!flags.costs_file.has_value()) return flags.from_flags;
  const std::string& path = *flags.costs_file;
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string content, ReadFile(path));
  StatusOr<CostModel> costs = ParseCostModel(content, DetectProtoFormat(path, content));
  if (!costs.ok()) return costs.status().WithContext(path);
  return costs;
}

StatusOr<RequestFlags> ParseRequestFlags(const Flags& flags, StrategyFlag strategy_flag) {
  RequestFlags out;
  out.request_file = flags.GetString("request");
  if (out.request_file.has_value()) {
    for (const std::string_view name : kTopologyFlags) {
      if (flags.Has(name)) {
        return InvalidArgument("--request cannot be combined with --" + std::string(name) +
                               " (the file holds the whole request)");
      }
    }
    return out;
  }
  if (strategy_flag == StrategyFlag::kRequired) {
    PIPEPLAN_ASSIGN_OR_RETURN(out.strategy, flags.RequireString("strategy"));
    if (out.strategy != kAutoStrategy && FindStrategy(out.strategy) == nullptr) {
      return InvalidArgument("unknown strategy '" + out.strategy + "' (known: " + StrategyNames() +
                             ")");
    }
  }
  PIPEPLAN_ASSIGN_OR_RETURN(out.ranks, flags.RequireInt("ranks", 1));
  PIPEPLAN_ASSIGN_OR_RETURN(out.microbatches, flags.RequireInt("microbatches", 1));
  PIPEPLAN_ASSIGN_OR_RETURN(out.stages_per_rank, flags.GetInt("stages-per-rank", 1));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> group,
                            flags.GetInt("microbatch-group-size", 1));
  out.microbatch_group_size = group.value_or(0);
  if (out.strategy == kAutoStrategy && group.has_value()) {
    return InvalidArgument(
        "--microbatch-group-size does not apply to --strategy auto (auto tries the group sizes "
        "itself)");
  }
  out.post_validation = flags.GetBool("post-validation");
  PIPEPLAN_ASSIGN_OR_RETURN(out.memory_limit, flags.GetNonNegativeDouble("memory-limit"));
  PIPEPLAN_ASSIGN_OR_RETURN(out.costs, ParseCostFlags(flags));
  return out;
}

StatusOr<PlanRequest> LoadRequest(const RequestFlags& flags) {
  if (flags.request_file.has_value()) {
    const std::string& path = *flags.request_file;
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string content, ReadFile(path));
    StatusOr<PlanRequest> request = ParseRequest(content, DetectProtoFormat(path, content));
    if (!request.ok()) return request.status().WithContext(path);
    return request;
  }
  PlanRequest request;
  request.strategy = flags.strategy;
  request.topology.ranks = flags.ranks;
  request.topology.microbatches = flags.microbatches;
  request.topology.stages_per_rank = flags.stages_per_rank.value_or(1);
  if (const Strategy* strategy = FindStrategy(flags.strategy); strategy != nullptr) {
    request.topology.placement = strategy->placement;
    if (!flags.stages_per_rank.has_value()) {
      request.topology.stages_per_rank = std::max(1, strategy->min_stages_per_rank);
    }
  }
  request.options.microbatch_group_size = flags.microbatch_group_size;
  request.options.post_validation = flags.post_validation;
  request.memory.limit = flags.memory_limit;
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, LoadCosts(flags.costs));
  return request;
}

StatusOr<Plan> ReadPlanFile(const std::string& path) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string content, ReadFile(path));
  StatusOr<Plan> plan = ParsePlan(content, DetectProtoFormat(path, content));
  if (!plan.ok()) return plan.status().WithContext(path);
  return plan;
}

StatusOr<Plan> LoadPlanFile(const std::string& path) {
  PIPEPLAN_ASSIGN_OR_RETURN(Plan plan, ReadPlanFile(path));
  // Files come from anywhere (other tools, hand edits): check them like imported plans.
  if (Status status = ValidatePlan(plan); !status.ok()) return status.WithContext(path);
  return plan;
}

}  // namespace pipeplan::cli
