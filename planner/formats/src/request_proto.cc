// PlanRequest, CostModel and their parts <-> pipeplan.v1.
#include <string>
#include <string_view>
#include <utility>

#include "proto_convert.h"

namespace pipeplan {
namespace proto_convert {

// MemoryModel.unit as files spell it; empty is the default model's unit.
constexpr std::string_view kBytesUnitName = "bytes";

void ToProto(const Topology& topology, v1::Topology* out) {
  out->set_ranks(topology.ranks);
  out->set_stages_per_rank(topology.stages_per_rank);
  out->set_microbatches(topology.microbatches);
  out->set_placement(kPlacements.ToProto(topology.placement));
}

void ToProto(const StageCosts& costs, v1::StageCosts* out) {
  out->set_forward(costs.forward);
  out->set_backward(costs.backward);
  out->set_backward_input(costs.backward_input);
  out->set_backward_weight(costs.backward_weight);
  out->set_overlap(costs.overlap);
}

void ToProto(const BoundaryCosts& costs, v1::BoundaryCosts* out) {
  out->set_latency(costs.latency);
  out->set_bandwidth(costs.bandwidth);
  out->set_activation_bytes(costs.activation_bytes);
  out->set_receive_overhead(costs.receive_overhead);
}

void ToProto(const FigureSource& source, v1::FigureSource* out) {
  out->set_origin(kFigureOrigins.ToProto(source.origin));
  out->set_run(source.run);
}

void ToProto(const StageSources& sources, v1::StageSources* out) {
  ToProto(sources.forward, out->mutable_forward());
  ToProto(sources.backward, out->mutable_backward());
  ToProto(sources.backward_input, out->mutable_backward_input());
  ToProto(sources.backward_weight, out->mutable_backward_weight());
  ToProto(sources.overlap, out->mutable_overlap());
}

void ToProto(const CostModel& costs, v1::CostModel* out) {
  for (const StageCosts& stage : costs.stages) ToProto(stage, out->add_stages());
  for (const BoundaryCosts& boundary : costs.boundaries) ToProto(boundary, out->add_boundaries());
  out->set_time_unit(costs.time_unit);
  out->set_chains(costs.chains);
  for (const StageSources& stage : costs.sources) ToProto(stage, out->add_sources());
  for (const std::string& run : costs.runs) out->add_runs(run);
  if (costs.memory.has_value()) ToProto(*costs.memory, out->mutable_memory());
}

void ToProto(const MemoryModel& memory, v1::MemoryModel* out) {
  for (const StageMemory& stage : memory.stages) {
    v1::StageMemory* entry = out->add_stages();
    entry->set_activation(stage.activation);
    entry->set_freed_by_input(stage.freed_by_input);
    entry->set_forward_transient(stage.forward_transient);
    entry->set_backward_transient(stage.backward_transient);
    entry->set_input_transient(stage.input_transient);
    entry->set_weight_transient(stage.weight_transient);
    entry->set_retained(stage.retained);
    entry->set_static_bytes(stage.static_bytes);
    entry->set_received_input(stage.received_input);
    entry->set_received_gradient(stage.received_gradient);
    entry->set_gradient(stage.gradient);
    entry->set_allocated_by_input(stage.allocated_by_input);
    entry->set_split_retained_extra(stage.split_retained_extra);
  }
  out->set_static_per_rank(memory.static_per_rank);
  for (const double bytes : memory.static_by_rank) out->add_static_by_rank(bytes);
  out->set_first_stage_static(memory.first_stage_static);
  out->set_last_stage_static(memory.last_stage_static);
  out->set_first_stage_data_per_microbatch(memory.first_stage_data_per_microbatch);
  out->set_last_stage_data_per_microbatch(memory.last_stage_data_per_microbatch);
  out->set_chains(memory.chains);
  if (memory.limit.has_value()) out->set_limit(*memory.limit);
  out->set_unit(memory.unit == MemoryUnit::kBytes ? std::string(kBytesUnitName) : "");
}

void ToProto(const PlanRequest& request, v1::PlanRequest* out) {
  ToProto(request.topology, out->mutable_topology());
  out->set_strategy(request.strategy);
  out->mutable_options()->set_microbatch_group_size(request.options.microbatch_group_size);
  out->mutable_options()->set_post_validation(request.options.post_validation);
  if (request.options.order_limit.has_value()) {
    out->mutable_options()->set_order_limit(*request.options.order_limit);
  }
  ToProto(request.costs, out->mutable_costs());
  ToProto(request.memory, out->mutable_memory());
  out->set_runtime(kRuntimes.ToProto(request.runtime));
  out->set_figures(kFigureScopes.ToProto(request.figures));
}

StatusOr<Topology> FromProto(const v1::Topology& proto, const std::string& path) {
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(proto.ranks(), 1, Child(path, "ranks")));
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(proto.stages_per_rank(), 0, Child(path, "stages_per_rank"),
                                        " (0 means the strategy's default)"));
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(proto.microbatches(), 1, Child(path, "microbatches")));
  Topology topology;
  topology.ranks = proto.ranks();
  topology.stages_per_rank = proto.stages_per_rank() == 0 ? 1 : proto.stages_per_rank();
  // Topology::num_stages() is an int product; keep it from overflowing in every consumer.
  const int64_t stages = static_cast<int64_t>(topology.ranks) * topology.stages_per_rank;
  if (stages > INT_MAX) {
    return FieldError(
        Child(path, "stages_per_rank"),
        "ranks * stages_per_rank = " + std::to_string(stages) + " stages is too many");
  }
  topology.microbatches = proto.microbatches();
  if (proto.placement() != v1::PLACEMENT_UNSPECIFIED) {
    const std::optional<Placement> placement = kPlacements.FromProto(proto.placement());
    if (!placement.has_value()) {
      return FieldError(Child(path, "placement"),
                        "unknown placement " + std::to_string(proto.placement()));
    }
    topology.placement = *placement;
  }
  return topology;
}

StageCosts FromProto(const v1::StageCosts& proto) {
  StageCosts costs;
  costs.forward = proto.forward();
  costs.backward = proto.backward();
  costs.backward_input = proto.backward_input();
  costs.backward_weight = proto.backward_weight();
  costs.overlap = proto.overlap();
  // The same defaults as the CLI flags: B = I + W when only the split is given, and
  // I = W = B / 2 when only B is (then assumed: SplitAssumedWhereOnlyBIsGiven).
  if (costs.backward == 0) costs.backward = costs.backward_input + costs.backward_weight;
  if (costs.backward_input == 0 && costs.backward_weight == 0) {
    costs.backward_input = costs.backward / 2;
    costs.backward_weight = costs.backward / 2;
  }
  return costs;
}

BoundaryCosts FromProto(const v1::BoundaryCosts& proto) {
  BoundaryCosts costs;
  costs.latency = proto.latency();
  costs.bandwidth = proto.bandwidth();
  costs.activation_bytes = proto.activation_bytes();
  costs.receive_overhead = proto.receive_overhead();
  return costs;
}

namespace {

// A file without sources that gives a stage's B alone leaves its split to the default I = W =
// B / 2, as the flags do: those figures are assumed (figure_sources.h), the others given.
// Empty where no stage was split so.
std::vector<StageSources> SplitAssumedWhereOnlyBIsGiven(const v1::CostModel& proto) {
  std::vector<StageSources> sources(static_cast<size_t>(proto.stages_size()));
  bool any = false;
  for (int s = 0; s < proto.stages_size(); ++s) {
    const v1::StageCosts& stage = proto.stages(s);
    if (stage.backward() > 0 && stage.backward_input() == 0 && stage.backward_weight() == 0) {
      sources[static_cast<size_t>(s)].AssumeSplit();
      any = true;
    }
  }
  return any ? sources : std::vector<StageSources>{};
}

// An origin this version does not know reads as assumed: never taken for measured.
FigureSource FromProto(const v1::FigureSource& proto) {
  return {.origin = kFigureOrigins.FromProto(proto.origin()).value_or(FigureOrigin::kAssumed),
          .run = proto.run()};
}

StageSources FromProto(const v1::StageSources& proto) {
  return {.forward = FromProto(proto.forward()),
          .backward = FromProto(proto.backward()),
          .backward_input = FromProto(proto.backward_input()),
          .backward_weight = FromProto(proto.backward_weight()),
          .overlap = FromProto(proto.overlap())};
}

}  // namespace

StatusOr<CostModel> FromProto(const v1::CostModel& proto, const std::string& path) {
  CostModel costs;  // starts with one default entry each: what an empty list means
  if (!proto.stages().empty()) {
    costs.stages.clear();
    for (const v1::StageCosts& stage : proto.stages()) costs.stages.push_back(FromProto(stage));
  }
  if (!proto.boundaries().empty()) {
    costs.boundaries.clear();
    for (const v1::BoundaryCosts& boundary : proto.boundaries()) {
      costs.boundaries.push_back(FromProto(boundary));
    }
  }
  costs.time_unit = proto.time_unit();
  costs.chains = proto.chains();
  for (const v1::StageSources& stage : proto.sources()) costs.sources.push_back(FromProto(stage));
  if (costs.sources.empty()) costs.sources = SplitAssumedWhereOnlyBIsGiven(proto);
  costs.runs.assign(proto.runs().begin(), proto.runs().end());
  if (proto.has_memory()) {
    PIPEPLAN_ASSIGN_OR_RETURN(costs.memory, FromProto(proto.memory(), Child(path, "memory")));
  }
  return costs;
}

StatusOr<MemoryModel> FromProto(const v1::MemoryModel& proto, const std::string& path) {
  MemoryModel memory;  // starts with one default stage entry
  if (!proto.stages().empty()) {
    memory.stages.clear();
    for (const v1::StageMemory& stage : proto.stages()) {
      memory.stages.push_back({.activation = stage.activation(),
                               .freed_by_input = stage.freed_by_input(),
                               .forward_transient = stage.forward_transient(),
                               .backward_transient = stage.backward_transient(),
                               .input_transient = stage.input_transient(),
                               .weight_transient = stage.weight_transient(),
                               .retained = stage.retained(),
                               .static_bytes = stage.static_bytes(),
                               .received_input = stage.received_input(),
                               .received_gradient = stage.received_gradient(),
                               .gradient = stage.gradient(),
                               .allocated_by_input = stage.allocated_by_input(),
                               .split_retained_extra = stage.split_retained_extra()});
    }
  }
  memory.static_per_rank = proto.static_per_rank();
  memory.static_by_rank.assign(proto.static_by_rank().begin(), proto.static_by_rank().end());
  memory.first_stage_static = proto.first_stage_static();
  memory.last_stage_static = proto.last_stage_static();
  memory.first_stage_data_per_microbatch = proto.first_stage_data_per_microbatch();
  memory.last_stage_data_per_microbatch = proto.last_stage_data_per_microbatch();
  memory.chains = proto.chains();
  if (proto.has_limit()) memory.limit = proto.limit();
  if (proto.unit() == kBytesUnitName) {
    memory.unit = MemoryUnit::kBytes;
  } else if (!proto.unit().empty()) {
    return FieldError(Child(path, "unit"), "'" + proto.unit() + "' is not a memory unit (\"" +
                                               std::string(kBytesUnitName) +
                                               "\", or empty for microbatch activations)");
  }
  return memory;
}

StatusOr<PlanRequest> FromProto(const v1::PlanRequest& proto, const std::string& path) {
  PlanRequest request;
  PIPEPLAN_ASSIGN_OR_RETURN(request.topology, FromProto(proto.topology(), Child(path, "topology")));
  // In a request, V = 0 asks for the strategy's default (the planner resolves it); a plan
  // always carries the V it was built with.
  if (proto.topology().stages_per_rank() == 0) request.topology.stages_per_rank = 0;
  if (!proto.strategy().empty()) request.strategy = proto.strategy();
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(proto.options().microbatch_group_size(), 0,
                                        Child(path, "options.microbatch_group_size"),
                                        " (0 means P)"));
  request.options.microbatch_group_size = proto.options().microbatch_group_size();
  request.options.post_validation = proto.options().post_validation();
  if (proto.options().has_order_limit()) {
    request.options.order_limit = proto.options().order_limit();
  }
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, FromProto(proto.costs(), Child(path, "costs")));
  PIPEPLAN_ASSIGN_OR_RETURN(request.memory, FromProto(proto.memory(), Child(path, "memory")));
  const std::optional<Runtime> runtime = kRuntimes.FromProto(proto.runtime());
  if (!runtime.has_value()) {
    return FieldError(Child(path, "runtime"), "unknown runtime " + std::to_string(proto.runtime()));
  }
  request.runtime = *runtime;
  const std::optional<FigureScope> figures = kFigureScopes.FromProto(proto.figures());
  if (!figures.has_value()) {
    return FieldError(Child(path, "figures"),
                      "unknown figure scope " + std::to_string(proto.figures()));
  }
  request.figures = *figures;
  return request;
}

}  // namespace proto_convert

StatusOr<std::string> SerializeRequest(const PlanRequest& request, ProtoFormat format) {
  v1::PlanRequest proto;
  proto_convert::ToProto(request, &proto);
  proto_convert::StampFile(FileKind::kRequest, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<PlanRequest> ParseRequest(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::PlanRequest>(
      data, format, FileKind::kRequest, "request file",
      [](const v1::PlanRequest& proto) { return proto_convert::FromProto(proto, /*path=*/""); });
}

StatusOr<std::string> SerializeCostModel(const CostModel& costs, ProtoFormat format) {
  v1::CostModel proto;
  proto_convert::ToProto(costs, &proto);
  proto_convert::StampFile(FileKind::kCostModel, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<CostModel> ParseCostModel(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::CostModel>(
      data, format, FileKind::kCostModel, "cost file",
      [](const v1::CostModel& proto) -> StatusOr<CostModel> {
        PIPEPLAN_ASSIGN_OR_RETURN(CostModel costs, proto_convert::FromProto(proto, /*path=*/""));
        // Shapes are checked against a plan's stages later; figures now, naming the field.
        PIPEPLAN_RETURN_IF_ERROR(ValidateSources(costs));
        if (costs.memory.has_value()) {
          PIPEPLAN_RETURN_IF_ERROR(
              ValidateMemoryModel(*costs.memory, static_cast<int>(costs.memory->stages.size())));
        }
        return costs;
      });
}

}  // namespace pipeplan
