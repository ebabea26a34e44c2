// Domain <-> pipeplan.v1 conversion and (de)serialisation. Parsing is where user files enter,
// so after the protobuf parser accepts a message we check what would otherwise crash or mislead
// domain code (unspecified kinds, negative ids, ids outside the plan's topology) and name the
// field path. Cross-field checks that depend on the final topology (cost and memory sizes of a
// request) are left to the planner, which may still override the topology from flags. Every
// error starts with what was being parsed ("plan file: ...").
#include "pipeplan/planner/proto_io.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan.pb.h"
#include "pipeplan/planner/text_format.h"
#include "utf8.h"

namespace pipeplan {
namespace {

namespace pb = ::google::protobuf;
namespace v1 = ::pipeplan::v1;

// ---------------------------------------------------------------------------------------------
// Enum mapping. One table per enum serves both directions; proto values missing from a table
// (UNSPECIFIED, or numbers from a newer schema) come back as nullopt.

template <typename Domain, typename Proto, size_t N>
struct EnumTable {
  std::array<std::pair<Domain, Proto>, N> entries;

  Proto ToProto(Domain value) const {
    for (const auto& [domain, proto] : entries) {
      if (domain == value) return proto;
    }
    return Proto{};  // unreachable while the table lists every domain value (tested)
  }

  std::optional<Domain> FromProto(int value) const {
    for (const auto& [domain, proto] : entries) {
      if (static_cast<int>(proto) == value) return domain;
    }
    return std::nullopt;
  }
};

constexpr EnumTable<ActionKind, v1::ActionKind, 12> kActionKinds = {{{
    {ActionKind::kForward, v1::FORWARD},
    {ActionKind::kBackward, v1::BACKWARD},
    {ActionKind::kBackwardInput, v1::BACKWARD_INPUT},
    {ActionKind::kBackwardWeight, v1::BACKWARD_WEIGHT},
    {ActionKind::kOverlapFB, v1::OVERLAP_F_B},
    {ActionKind::kSendForward, v1::SEND_F},
    {ActionKind::kRecvForward, v1::RECV_F},
    {ActionKind::kSendBackward, v1::SEND_B},
    {ActionKind::kRecvBackward, v1::RECV_B},
    {ActionKind::kPostValidation, v1::POST_VALIDATION},
    {ActionKind::kSendPostValidation, v1::SEND_PV},
    {ActionKind::kRecvPostValidation, v1::RECV_PV},
}}};

constexpr EnumTable<Placement, v1::Placement, 3> kPlacements = {{{
    {Placement::kLoop, v1::PLACEMENT_LOOP},
    {Placement::kVShape, v1::PLACEMENT_V_SHAPE},
    {Placement::kDual, v1::PLACEMENT_DUAL},
}}};

constexpr EnumTable<TimelineSource, v1::TimelineSource, 2> kTimelineSources = {{{
    {TimelineSource::kSimulated, v1::SIMULATED},
    {TimelineSource::kMeasured, v1::MEASURED},
}}};

// ---------------------------------------------------------------------------------------------
// Field paths for error messages: "programs[2].actions[17].kind".

std::string Child(const std::string& parent, std::string_view field) {
  if (parent.empty()) return std::string(field);
  return parent + "." + std::string(field);
}

std::string Element(const std::string& path, int index) {
  return path + "[" + std::to_string(index) + "]";
}

Status FieldError(const std::string& path, const std::string& message) {
  return InvalidArgument(path + ": " + message);
}

Status CheckAtLeast(int value, int minimum, const std::string& path, std::string_view note = "") {
  if (value >= minimum) return Status::Ok();
  return FieldError(path, "must be >= " + std::to_string(minimum) + std::string(note) + ", got " +
                              std::to_string(value));
}

// Checks 0 <= value < bound.
Status CheckIndex(int value, int bound, const std::string& path) {
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(value, 0, path));
  if (value < bound) return Status::Ok();
  return FieldError(
      path, "out of range 0.." + std::to_string(bound - 1) + ", got " + std::to_string(value));
}

// ---------------------------------------------------------------------------------------------
// Domain -> proto. Cannot fail.

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

void ToProto(const CostModel& costs, v1::CostModel* out) {
  for (const StageCosts& stage : costs.stages) ToProto(stage, out->add_stages());
  for (const BoundaryCosts& boundary : costs.boundaries) ToProto(boundary, out->add_boundaries());
  out->set_time_unit(costs.time_unit);
}

void ToProto(const MemoryModel& memory, v1::MemoryModel* out) {
  for (const StageMemory& stage : memory.stages) {
    v1::StageMemory* entry = out->add_stages();
    entry->set_activation(stage.activation);
    entry->set_freed_by_input(stage.freed_by_input);
  }
  out->set_static_per_rank(memory.static_per_rank);
  if (memory.limit.has_value()) out->set_limit(*memory.limit);
}

void ToProto(const PlanRequest& request, v1::PlanRequest* out) {
  ToProto(request.topology, out->mutable_topology());
  out->set_strategy(request.strategy);
  out->mutable_options()->set_microbatch_group_size(request.options.microbatch_group_size);
  out->mutable_options()->set_post_validation(request.options.post_validation);
  ToProto(request.costs, out->mutable_costs());
  ToProto(request.memory, out->mutable_memory());
}

void ToProto(const Action& action, v1::Action* out) {
  out->set_kind(kActionKinds.ToProto(action.kind));
  out->set_stage(action.stage.value);
  out->set_microbatch(action.microbatch.value);
  out->set_peer(action.peer.value);
  out->set_rollback(action.rollback);
  for (const Action& sub : action.sub_actions) ToProto(sub, out->add_sub_actions());
}

void ToProto(const Plan& plan, v1::Plan* out) {
  ToProto(plan.request, out->mutable_request());
  for (const RankProgram& program : plan.programs) {
    v1::RankProgram* entry = out->add_programs();
    entry->set_rank(program.rank.value);
    for (const Action& action : program.actions) ToProto(action, entry->add_actions());
  }
  v1::Provenance* provenance = out->mutable_provenance();
  provenance->set_tool_version(plan.provenance.tool_version);
  provenance->set_strategy(plan.provenance.strategy);
  provenance->set_options(plan.provenance.options);
}

void ToProto(const RankTimeline& rank, v1::RankTimeline* out) {
  out->set_rank(rank.rank.value);
  for (const ActionTiming& timing : rank.actions) {
    v1::ActionTiming* entry = out->add_actions();
    entry->set_start(timing.start);
    entry->set_end(timing.end);
    entry->set_thread(timing.thread);
  }
  out->set_busy(rank.busy);
  out->set_first_start(rank.first_start);
  out->set_last_end(rank.last_end);
  out->set_peak_activation_memory(rank.peak_activation_memory);
  out->set_peak_memory(rank.peak_memory);
  for (const MemorySample& sample : rank.memory) {
    v1::MemorySample* entry = out->add_memory();
    entry->set_time(sample.time);
    entry->set_bytes(sample.bytes);
  }
}

void ToProto(const Timeline& timeline, v1::Timeline* out) {
  out->set_source(kTimelineSources.ToProto(timeline.source));
  for (const RankTimeline& rank : timeline.ranks) ToProto(rank, out->add_ranks());
  v1::Metrics* metrics = out->mutable_metrics();
  metrics->set_makespan(timeline.metrics.makespan);
  metrics->set_zb_bubble_rate(timeline.metrics.zb_bubble_rate);
  metrics->set_bubble_fraction_max(timeline.metrics.bubble_fraction_max);
  metrics->set_bubble_fraction_mean(timeline.metrics.bubble_fraction_mean);
  metrics->set_lower_bound(timeline.metrics.lower_bound);
  metrics->set_gap_to_lower_bound(timeline.metrics.gap_to_lower_bound);
}

void ToProto(const DurationStats& stats, v1::DurationStats* out) {
  out->set_samples(stats.samples);
  out->set_median(stats.median);
  out->set_min(stats.min);
  out->set_max(stats.max);
  out->set_p10(stats.p10);
  out->set_p90(stats.p90);
  out->set_mean(stats.mean);
}

// Kinds with no samples are left out: an absent message reads back as nothing measured.
void ToProto(const Profile& profile, v1::Profile* out) {
  out->set_source(profile.source);
  out->set_steps(profile.steps);
  for (const StageProfile& stage : profile.stages) {
    v1::StageProfile* entry = out->add_stages();
    if (stage.forward.samples > 0) ToProto(stage.forward, entry->mutable_forward());
    if (stage.backward.samples > 0) ToProto(stage.backward, entry->mutable_backward());
    if (stage.backward_input.samples > 0) {
      ToProto(stage.backward_input, entry->mutable_backward_input());
    }
    if (stage.backward_weight.samples > 0) {
      ToProto(stage.backward_weight, entry->mutable_backward_weight());
    }
    if (stage.overlap.samples > 0) ToProto(stage.overlap, entry->mutable_overlap());
  }
  for (const BoundaryProfile& boundary : profile.boundaries) {
    v1::BoundaryProfile* entry = out->add_boundaries();
    if (boundary.transfer.samples > 0) ToProto(boundary.transfer, entry->mutable_transfer());
    entry->set_late_receives(boundary.late_receives);
    entry->set_latency(boundary.latency);
    entry->set_bandwidth(boundary.bandwidth);
    entry->set_activation_bytes(boundary.activation_bytes);
    if (boundary.receive_overhead.samples > 0) {
      ToProto(boundary.receive_overhead, entry->mutable_receive_overhead());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Proto -> domain. Proto3 zero values map to the domain defaults where the schema says so.

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
  // I = W = B / 2 when only B is.
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

CostModel FromProto(const v1::CostModel& proto) {
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
  return costs;
}

MemoryModel FromProto(const v1::MemoryModel& proto) {
  MemoryModel memory;  // starts with one default stage entry
  if (!proto.stages().empty()) {
    memory.stages.clear();
    for (const v1::StageMemory& stage : proto.stages()) {
      memory.stages.push_back(
          {.activation = stage.activation(), .freed_by_input = stage.freed_by_input()});
    }
  }
  memory.static_per_rank = proto.static_per_rank();
  if (proto.has_limit()) memory.limit = proto.limit();
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
  request.costs = FromProto(proto.costs());
  request.memory = FromProto(proto.memory());
  return request;
}

bool IsPostValidation(ActionKind kind) {
  return kind == ActionKind::kPostValidation || kind == ActionKind::kSendPostValidation ||
         kind == ActionKind::kRecvPostValidation;
}

bool IsBackwardKind(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput ||
         kind == ActionKind::kBackwardWeight;
}

// `topology` is the plan's own: the ids an action may refer to.
StatusOr<Action> FromProto(const v1::Action& proto, const Topology& topology,
                           const std::string& path);

// An overlap cell is exactly {forward, backward}; anything else has no sub-actions.
Status ConvertSubActions(const v1::Action& proto, const Topology& topology, const std::string& path,
                         Action* action) {
  const std::string sub_path = Child(path, "sub_actions");
  if (action->kind != ActionKind::kOverlapFB) {
    if (proto.sub_actions().empty()) return Status::Ok();
    return FieldError(sub_path, "only OVERLAP_F_B actions have sub-actions");
  }
  if (proto.sub_actions_size() != 2) {
    return FieldError(sub_path,
                      "an OVERLAP_F_B action needs 2 sub-actions (forward, backward), got " +
                          std::to_string(proto.sub_actions_size()));
  }
  for (int i = 0; i < 2; ++i) {
    PIPEPLAN_ASSIGN_OR_RETURN(Action sub,
                              FromProto(proto.sub_actions(i), topology, Element(sub_path, i)));
    action->sub_actions.push_back(std::move(sub));
  }
  if (action->sub_actions[0].kind != ActionKind::kForward) {
    return FieldError(Child(Element(sub_path, 0), "kind"),
                      "expected FORWARD, got " + v1::ActionKind_Name(proto.sub_actions(0).kind()));
  }
  if (!IsBackwardKind(action->sub_actions[1].kind)) {
    return FieldError(Child(Element(sub_path, 1), "kind"),
                      "expected BACKWARD, BACKWARD_INPUT or BACKWARD_WEIGHT, got " +
                          v1::ActionKind_Name(proto.sub_actions(1).kind()));
  }
  return Status::Ok();
}

StatusOr<Action> FromProto(const v1::Action& proto, const Topology& topology,
                           const std::string& path) {
  if (proto.kind() == v1::ACTION_KIND_UNSPECIFIED) {
    return FieldError(Child(path, "kind"), "unspecified action kind");
  }
  const std::optional<ActionKind> kind = kActionKinds.FromProto(proto.kind());
  if (!kind.has_value()) {
    return FieldError(Child(path, "kind"), "unknown action kind " + std::to_string(proto.kind()));
  }
  Action action;
  action.kind = *kind;
  PIPEPLAN_RETURN_IF_ERROR(CheckIndex(proto.stage(), topology.num_stages(), Child(path, "stage")));
  action.stage = StageId(proto.stage());
  // PV actions carry no microbatch and compute actions no peer: only their sign is checked.
  PIPEPLAN_RETURN_IF_ERROR(
      IsPostValidation(*kind)
          ? CheckAtLeast(proto.microbatch(), 0, Child(path, "microbatch"))
          : CheckIndex(proto.microbatch(), topology.microbatches, Child(path, "microbatch")));
  action.microbatch = MicrobatchId(proto.microbatch());
  PIPEPLAN_RETURN_IF_ERROR(IsComm(*kind)
                               ? CheckIndex(proto.peer(), topology.ranks, Child(path, "peer"))
                               : CheckAtLeast(proto.peer(), 0, Child(path, "peer")));
  action.peer = RankId(proto.peer());
  if (proto.rollback() && *kind != ActionKind::kRecvForward) {
    return FieldError(Child(path, "rollback"), "only RECV_F actions carry the rollback flag");
  }
  action.rollback = proto.rollback();
  PIPEPLAN_RETURN_IF_ERROR(ConvertSubActions(proto, topology, path, &action));
  return action;
}

StatusOr<Plan> FromProto(const v1::Plan& proto) {
  Plan plan;
  PIPEPLAN_ASSIGN_OR_RETURN(plan.request, FromProto(proto.request(), "request"));
  const Topology& topology = plan.request.topology;
  // A plan is a finished artifact: its costs must fit its own topology, or simulating it
  // would index past the per-stage tables.
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateCostModel(plan.request.costs, topology.num_stages()).WithContext("request"));
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateMemoryModel(plan.request.memory, topology.num_stages()).WithContext("request"));
  if (proto.programs_size() != topology.ranks) {
    return FieldError("programs", "expected " + std::to_string(topology.ranks) +
                                      " rank programs (request.topology.ranks), got " +
                                      std::to_string(proto.programs_size()));
  }
  for (int r = 0; r < proto.programs_size(); ++r) {
    const v1::RankProgram& program = proto.programs(r);
    const std::string path = Element("programs", r);
    if (program.rank() != r) {
      return FieldError(Child(path, "rank"), "expected " + std::to_string(r) +
                                                 " (programs are listed in rank order), got " +
                                                 std::to_string(program.rank()));
    }
    RankProgram& out = plan.programs.emplace_back();
    out.rank = RankId(r);
    for (int i = 0; i < program.actions_size(); ++i) {
      PIPEPLAN_ASSIGN_OR_RETURN(Action action, FromProto(program.actions(i), topology,
                                                         Element(Child(path, "actions"), i)));
      out.actions.push_back(std::move(action));
    }
  }
  plan.provenance.tool_version = proto.provenance().tool_version();
  plan.provenance.strategy = proto.provenance().strategy();
  plan.provenance.options = proto.provenance().options();
  return plan;
}

RankTimeline FromProto(const v1::RankTimeline& proto) {
  RankTimeline rank;
  rank.rank = RankId(proto.rank());
  for (const v1::ActionTiming& timing : proto.actions()) {
    rank.actions.push_back(
        {.start = timing.start(), .end = timing.end(), .thread = timing.thread()});
  }
  rank.busy = proto.busy();
  rank.first_start = proto.first_start();
  rank.last_end = proto.last_end();
  rank.peak_activation_memory = proto.peak_activation_memory();
  rank.peak_memory = proto.peak_memory();
  for (const v1::MemorySample& sample : proto.memory()) {
    rank.memory.push_back({.time = sample.time(), .bytes = sample.bytes()});
  }
  return rank;
}

StatusOr<Timeline> FromProto(const v1::Timeline& proto) {
  Timeline timeline;  // UNSPECIFIED source keeps the domain default (simulated)
  if (proto.source() != v1::TIMELINE_SOURCE_UNSPECIFIED) {
    const std::optional<TimelineSource> source = kTimelineSources.FromProto(proto.source());
    if (!source.has_value()) {
      return FieldError("source", "unknown timeline source " + std::to_string(proto.source()));
    }
    timeline.source = *source;
  }
  for (int r = 0; r < proto.ranks_size(); ++r) {
    PIPEPLAN_RETURN_IF_ERROR(
        CheckAtLeast(proto.ranks(r).rank(), 0, Child(Element("ranks", r), "rank")));
    timeline.ranks.push_back(FromProto(proto.ranks(r)));
  }
  const v1::Metrics& metrics = proto.metrics();
  timeline.metrics = {
      .makespan = metrics.makespan(),
      .zb_bubble_rate = metrics.zb_bubble_rate(),
      .bubble_fraction_max = metrics.bubble_fraction_max(),
      .bubble_fraction_mean = metrics.bubble_fraction_mean(),
      .lower_bound = metrics.lower_bound(),
      .gap_to_lower_bound = metrics.gap_to_lower_bound(),
  };
  return timeline;
}

DurationStats FromProto(const v1::DurationStats& proto) {
  return {.samples = proto.samples(),
          .median = proto.median(),
          .min = proto.min(),
          .max = proto.max(),
          .p10 = proto.p10(),
          .p90 = proto.p90(),
          .mean = proto.mean()};
}

StatusOr<Profile> FromProto(const v1::Profile& proto) {
  Profile profile;
  profile.source = proto.source();
  profile.steps = proto.steps();
  for (const v1::StageProfile& stage : proto.stages()) {
    profile.stages.push_back({.forward = FromProto(stage.forward()),
                              .backward = FromProto(stage.backward()),
                              .backward_input = FromProto(stage.backward_input()),
                              .backward_weight = FromProto(stage.backward_weight()),
                              .overlap = FromProto(stage.overlap())});
  }
  for (const v1::BoundaryProfile& boundary : proto.boundaries()) {
    profile.boundaries.push_back({.transfer = FromProto(boundary.transfer()),
                                  .late_receives = boundary.late_receives(),
                                  .latency = boundary.latency(),
                                  .bandwidth = boundary.bandwidth(),
                                  .activation_bytes = boundary.activation_bytes(),
                                  .receive_overhead = FromProto(boundary.receive_overhead())});
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateProfile(profile));
  return profile;
}

// ---------------------------------------------------------------------------------------------
// Serialisation.

std::string_view MessageOf(const pb::util::Status& status) {
  return {status.message().data(), status.message().size()};
}

// Whether a message of this type can hold a string, itself or in a field's message type;
// `visiting` cuts the recursion of self-nesting types (Action.sub_actions).
bool MayHoldStrings(const pb::Descriptor* type, std::vector<const pb::Descriptor*>* visiting) {
  if (std::find(visiting->begin(), visiting->end(), type) != visiting->end()) return false;
  visiting->push_back(type);
  bool found = false;
  for (int i = 0; i < type->field_count() && !found; ++i) {
    const pb::FieldDescriptor* field = type->field(i);
    found = field->type() == pb::FieldDescriptor::TYPE_STRING ||
            (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
             MayHoldStrings(field->message_type(), visiting));
  }
  visiting->pop_back();
  return found;
}

// The path of the first string field that is not UTF-8 ("provenance.options"), if any. Only
// message types that can hold a string are walked, so the actions of a plan are skipped.
std::optional<std::string> FindInvalidUtf8(const pb::Message& message, const std::string& path) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string name = Child(path, field->name());
    if (field->type() == pb::FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      if (!field->is_repeated()) {
        if (!IsValidUtf8(reflection->GetStringReference(message, field, &scratch))) return name;
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (!IsValidUtf8(reflection->GetRepeatedStringReference(message, field, i, &scratch))) {
          return Element(name, i);
        }
      }
      continue;
    }
    std::vector<const pb::Descriptor*> visiting;
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
        !MayHoldStrings(field->message_type(), &visiting)) {
      continue;
    }
    if (!field->is_repeated()) {
      if (auto found = FindInvalidUtf8(reflection->GetMessage(message, field), name)) return found;
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      const pb::Message& element = reflection->GetRepeatedMessage(message, field, i);
      if (auto found = FindInvalidUtf8(element, Element(name, i))) return found;
    }
  }
  return std::nullopt;
}

// Whether a message of `type`, or one nested in it, can hold a double. `visiting` breaks the
// schema's cycles (an action's sub-actions are actions).
bool MayHoldDoubles(const pb::Descriptor* type, std::vector<const pb::Descriptor*>& visiting) {
  if (std::find(visiting.begin(), visiting.end(), type) != visiting.end()) return false;
  visiting.push_back(type);
  bool found = false;
  for (int i = 0; i < type->field_count() && !found; ++i) {
    const pb::FieldDescriptor* field = type->field(i);
    found = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE ||
            (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
             MayHoldDoubles(field->message_type(), visiting));
  }
  visiting.pop_back();
  return found;
}

bool MayHoldDoubles(const pb::Descriptor* type) {
  std::vector<const pb::Descriptor*> visiting;
  return MayHoldDoubles(type, visiting);
}

bool IsNegativeZero(double value) { return value == 0.0 && std::signbit(value); }

// JSON has one zero ("-0" reads back as 0), so a -0.0 read from a binary or text file would
// not survive being written as JSON and read again: every double read is made +0.0 instead
// (found by the request_file fuzzer).
void ClearNegativeZeros(pb::Message& message) {
  const pb::Reflection* reflection = message.GetReflection();
  const pb::Descriptor* type = message.GetDescriptor();
  for (int f = 0; f < type->field_count(); ++f) {
    const pb::FieldDescriptor* field = type->field(f);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
      if (!field->is_repeated()) {
        if (IsNegativeZero(reflection->GetDouble(message, field))) {
          reflection->SetDouble(&message, field, 0.0);
        }
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (IsNegativeZero(reflection->GetRepeatedDouble(message, field, i))) {
          reflection->SetRepeatedDouble(&message, field, i, 0.0);
        }
      }
    } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
               MayHoldDoubles(field->message_type())) {
      if (!field->is_repeated()) {
        if (reflection->HasField(message, field)) {
          ClearNegativeZeros(*reflection->MutableMessage(&message, field));
        }
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        ClearNegativeZeros(*reflection->MutableRepeatedMessage(&message, field, i));
      }
    }
  }
}

// Text and JSON parsing do not check that strings are UTF-8 (binary parsing does), nor does
// serialising.
Status CheckUtf8(const pb::Message& message) {
  const std::optional<std::string> field = FindInvalidUtf8(message, "");
  if (!field.has_value()) return Status::Ok();
  return FieldError(*field, "not valid UTF-8 (protobuf strings must be UTF-8)");
}

StatusOr<std::string> Serialize(const pb::Message& message, ProtoFormat format) {
  // A string that is not UTF-8 (a name given on the command line) would make a binary file
  // that cannot be read back.
  PIPEPLAN_RETURN_IF_ERROR(
      CheckUtf8(message).WithContext("cannot write " + message.GetDescriptor()->full_name()));
  const pb::LogSilencer silence_protobuf_logging;  // library code never prints
  std::string out;
  switch (format) {
    case ProtoFormat::kBinary: {
      pb::io::StringOutputStream stream(&out);
      pb::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);  // stays byte-stable if the schema gains maps
      if (!message.SerializeToCodedStream(&coded)) {
        return Internal("cannot serialise " + message.GetDescriptor()->full_name() +
                        " (over 2 GiB?)");
      }
      break;  // the coded stream flushes into `out` when it goes out of scope
    }
    case ProtoFormat::kText:
      if (!pb::TextFormat::PrintToString(message, &out)) {
        return Internal("cannot print " + message.GetDescriptor()->full_name() + " as text");
      }
      break;
    case ProtoFormat::kJson: {
      pb::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.always_print_primitive_fields = true;  // users see every field, zeros included
      options.preserve_proto_field_names = true;
      const auto status = pb::util::MessageToJsonString(message, &out, options);
      if (!status.ok()) return Internal("cannot print JSON: " + std::string(MessageOf(status)));
      break;
    }
  }
  return out;
}

// Keeps the first error: later ones are usually consequences of it.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!message_.empty()) return;
    // protobuf counts from 0; editors count from 1.
    message_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
               ": " + message;
  }

  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// protobuf's JSON parser reports syntax errors as "<what>\n<up to 20 bytes either side>\n
// <spaces>^". Where that snippet occurs once in the input, it pins down the position, which we
// report like text-format errors; otherwise only the first line is kept.
std::string DescribeJsonError(std::string_view input, std::string_view message) {
  if (message.starts_with(": ")) message.remove_prefix(2);  // empty path, e.g. a root array
  const size_t first_break = message.find('\n');
  if (first_break == std::string_view::npos) return std::string(message);
  const std::string_view what = message.substr(0, first_break);
  const size_t last_break = message.rfind('\n');
  const std::string_view caret_line = message.substr(last_break + 1);
  const std::string_view snippet =
      last_break > first_break ? message.substr(first_break + 1, last_break - first_break - 1)
                               : std::string_view();
  const size_t caret = caret_line.find_first_not_of(' ');
  const bool well_formed = caret != std::string_view::npos && caret_line.substr(caret) == "^" &&
                           caret <= snippet.size() && !snippet.empty();
  if (!well_formed) return std::string(what);
  const size_t found = input.find(snippet);
  if (found == std::string_view::npos || input.find(snippet, found + 1) != std::string_view::npos) {
    return std::string(what);
  }
  const size_t offset = found + caret;
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (input[i] != '\n') continue;
    ++line;
    line_start = i + 1;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1) +
         ": " + std::string(what);
}

Status ParseMessage(std::string_view data, ProtoFormat format, pb::Message* message) {
  // Library code never prints; protobuf would log invalid UTF-8 in binary input to stderr.
  const pb::LogSilencer silence_protobuf_logging;
  if (data.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument("input of " + std::to_string(data.size()) + " bytes is over 2 GiB");
  }
  const int size = static_cast<int>(data.size());
  switch (format) {
    case ProtoFormat::kBinary:
      if (message->ParseFromArray(data.data(), size)) {
        ClearNegativeZeros(*message);
        return Status::Ok();
      }
      return InvalidArgument("not a valid binary " + message->GetDescriptor()->full_name());
    case ProtoFormat::kText: {
      FirstErrorCollector errors;
      pb::TextFormat::Parser parser;
      parser.RecordErrorsTo(&errors);
      pb::io::ArrayInputStream stream(data.data(), size);
      if (parser.Parse(&stream, message)) {
        ClearNegativeZeros(*message);
        return CheckUtf8(*message);
      }
      if (errors.message().empty()) {
        return InvalidArgument("not a valid text-format " + message->GetDescriptor()->full_name());
      }
      return InvalidArgument(errors.message());
    }
    case ProtoFormat::kJson: {
      const auto status = pb::util::JsonStringToMessage(pb::StringPiece(data.data(), data.size()),
                                                        message, pb::util::JsonParseOptions());
      if (status.ok()) {
        ClearNegativeZeros(*message);
        return CheckUtf8(*message);
      }
      return InvalidArgument(DescribeJsonError(data, MessageOf(status)));
    }
  }
  return Internal("unknown proto format");
}

// Parses `data` as a `ProtoMessage` and converts it; every error starts with `what`.
template <typename ProtoMessage, typename Convert>
auto ParseAs(std::string_view data, ProtoFormat format, const std::string& what, Convert convert)
    -> decltype(convert(std::declval<const ProtoMessage&>())) {
  ProtoMessage proto;
  PIPEPLAN_RETURN_IF_ERROR(ParseMessage(data, format, &proto).WithContext(what));
  auto converted = convert(proto);
  if (!converted.ok()) return converted.status().WithContext(what);
  return converted;
}

bool EndsWithIgnoreCase(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  const std::string_view tail = text.substr(text.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != suffix[i]) return false;
  }
  return true;
}

// Text format and JSON are printable; binary protos almost always hold a tag byte below 0x20
// (any varint field 1..3, for a start). Bytes >= 0x80 count as printable: UTF-8 in strings.
bool LooksLikeText(std::string_view content) {
  for (const char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r' && byte != '\f' &&
        byte != '\v') {
      return false;
    }
    if (byte == 0x7f) return false;
  }
  return true;
}

}  // namespace

ProtoFormat DetectProtoFormat(std::string_view path, std::string_view content) {
  for (const std::string_view suffix : {".pb", ".bin"}) {
    if (EndsWithIgnoreCase(path, suffix)) return ProtoFormat::kBinary;
  }
  for (const std::string_view suffix : {".textproto", ".txtpb", ".pbtxt"}) {
    if (EndsWithIgnoreCase(path, suffix)) return ProtoFormat::kText;
  }
  if (EndsWithIgnoreCase(path, ".json")) return ProtoFormat::kJson;
  if (!LooksLikeText(content)) return ProtoFormat::kBinary;
  const size_t first = content.find_first_not_of(" \t\r\n\f\v");
  if (first != std::string_view::npos && content[first] == '{') return ProtoFormat::kJson;
  return ProtoFormat::kText;
}

StatusOr<std::string> SerializePlan(const Plan& plan, ProtoFormat format) {
  v1::Plan proto;
  ToProto(plan, &proto);
  return Serialize(proto, format);
}

StatusOr<Plan> ParsePlan(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::Plan>(data, format, "plan file",
                           [](const v1::Plan& proto) { return FromProto(proto); });
}

StatusOr<std::string> SerializeRequest(const PlanRequest& request, ProtoFormat format) {
  v1::PlanRequest proto;
  ToProto(request, &proto);
  return Serialize(proto, format);
}

StatusOr<PlanRequest> ParseRequest(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::PlanRequest>(data, format, "request file", [](const v1::PlanRequest& proto) {
    return FromProto(proto, /*path=*/"");
  });
}

StatusOr<std::string> SerializeCostModel(const CostModel& costs, ProtoFormat format) {
  v1::CostModel proto;
  ToProto(costs, &proto);
  return Serialize(proto, format);
}

StatusOr<CostModel> ParseCostModel(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::CostModel>(data, format, "cost file", [](const v1::CostModel& proto) {
    return StatusOr<CostModel>(FromProto(proto));
  });
}

StatusOr<std::string> SerializeTimeline(const Timeline& timeline, ProtoFormat format) {
  v1::Timeline proto;
  ToProto(timeline, &proto);
  return Serialize(proto, format);
}

StatusOr<Timeline> ParseTimeline(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::Timeline>(data, format, "timeline file",
                               [](const v1::Timeline& proto) { return FromProto(proto); });
}

StatusOr<std::string> SerializeTimelineFile(const TimelineFile& file, ProtoFormat format) {
  v1::Timeline proto;
  ToProto(file.timeline, &proto);
  if (file.plan) ToProto(*file.plan, proto.mutable_plan());
  if (file.seconds_per_unit) proto.set_seconds_per_unit(*file.seconds_per_unit);
  return Serialize(proto, format);
}

StatusOr<TimelineFile> ParseTimelineFile(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::Timeline>(data, format, "timeline file",
                               [](const v1::Timeline& proto) -> StatusOr<TimelineFile> {
                                 TimelineFile file;
                                 PIPEPLAN_ASSIGN_OR_RETURN(file.timeline, FromProto(proto));
                                 if (proto.has_plan()) {
                                   StatusOr<Plan> plan = FromProto(proto.plan());
                                   if (!plan.ok()) return plan.status().WithContext("plan");
                                   file.plan = std::move(plan).value();
                                 }
                                 const double scale = proto.seconds_per_unit();
                                 if (scale != 0) {
                                   if (!std::isfinite(scale) || scale < 0) {
                                     return FieldError("seconds_per_unit",
                                                       "must be a finite number > 0 (or 0 for "
                                                       "not recorded), got " +
                                                           FormatNumber(scale));
                                   }
                                   file.seconds_per_unit = scale;
                                 }
                                 return file;
                               });
}

StatusOr<std::string> SerializeProfile(const Profile& profile, ProtoFormat format) {
  v1::Profile proto;
  ToProto(profile, &proto);
  return Serialize(proto, format);
}

StatusOr<Profile> ParseProfile(std::string_view data, ProtoFormat format) {
  return ParseAs<v1::Profile>(data, format, "profile file",
                              [](const v1::Profile& proto) { return FromProto(proto); });
}

}  // namespace pipeplan
