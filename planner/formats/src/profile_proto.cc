// Profile <-> pipeplan.v1. Parsing checks the result with ValidateProfile.
#include <string>
#include <utility>

#include "proto_convert.h"

namespace pipeplan {
namespace proto_convert {

void ToProto(const DurationStats& stats, v1::DurationStats* out) {
  out->set_samples(stats.samples);
  out->set_median(stats.median);
  out->set_min(stats.min);
  out->set_max(stats.max);
  out->set_p10(stats.p10);
  out->set_p90(stats.p90);
  out->set_mean(stats.mean);
}

void ToProto(const StageMemoryProfile& memory, v1::StageMemoryProfile* out) {
  const std::pair<const DurationStats*, v1::DurationStats*> fields[] = {
      {&memory.kept_by_forward, out->mutable_kept_by_forward()},
      {&memory.freed_by_backward, out->mutable_freed_by_backward()},
      {&memory.freed_by_input, out->mutable_freed_by_input()},
      {&memory.freed_by_weight, out->mutable_freed_by_weight()},
      {&memory.forward_transient, out->mutable_forward_transient()},
      {&memory.backward_transient, out->mutable_backward_transient()},
      {&memory.input_transient, out->mutable_input_transient()},
      {&memory.weight_transient, out->mutable_weight_transient()},
      {&memory.received_forward, out->mutable_received_forward()},
      {&memory.received_backward, out->mutable_received_backward()}};
  for (const auto& [stats, field] : fields) ToProto(*stats, field);
  out->set_static_bytes(memory.static_bytes);
  out->set_input_bytes(memory.input_bytes);
  out->set_target_bytes(memory.target_bytes);
  out->set_gradient_bytes(memory.gradient_bytes);
  out->set_microbatches(memory.microbatches);
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
    if (stage.memory != StageMemoryProfile{}) ToProto(stage.memory, entry->mutable_memory());
  }
  for (const double bytes : profile.static_bytes) out->add_static_bytes(bytes);
  for (const double bytes : profile.own_static_bytes) out->add_own_static_bytes(bytes);
  out->set_chains(profile.chains);
  out->set_plan(profile.plan);
  for (const BoundaryProfile& boundary : profile.boundaries) {
    v1::BoundaryProfile* entry = out->add_boundaries();
    if (boundary.transfer.samples > 0) ToProto(boundary.transfer, entry->mutable_transfer());
    entry->set_late_receives(boundary.late_receives);
    entry->set_same_rank(boundary.same_rank);
    entry->set_latency(boundary.latency);
    entry->set_bandwidth(boundary.bandwidth);
    entry->set_activation_bytes(boundary.activation_bytes);
    if (boundary.receive_overhead.samples > 0) {
      ToProto(boundary.receive_overhead, entry->mutable_receive_overhead());
    }
  }
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

StageMemoryProfile FromProto(const v1::StageMemoryProfile& proto) {
  return {.kept_by_forward = FromProto(proto.kept_by_forward()),
          .freed_by_backward = FromProto(proto.freed_by_backward()),
          .freed_by_input = FromProto(proto.freed_by_input()),
          .freed_by_weight = FromProto(proto.freed_by_weight()),
          .forward_transient = FromProto(proto.forward_transient()),
          .backward_transient = FromProto(proto.backward_transient()),
          .input_transient = FromProto(proto.input_transient()),
          .weight_transient = FromProto(proto.weight_transient()),
          .received_forward = FromProto(proto.received_forward()),
          .received_backward = FromProto(proto.received_backward()),
          .static_bytes = proto.static_bytes(),
          .input_bytes = proto.input_bytes(),
          .target_bytes = proto.target_bytes(),
          .gradient_bytes = proto.gradient_bytes(),
          .microbatches = proto.microbatches()};
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
                              .overlap = FromProto(stage.overlap()),
                              .memory = FromProto(stage.memory())});
  }
  profile.static_bytes.assign(proto.static_bytes().begin(), proto.static_bytes().end());
  profile.own_static_bytes.assign(proto.own_static_bytes().begin(), proto.own_static_bytes().end());
  profile.chains = proto.chains();
  profile.plan = proto.plan();
  for (const v1::BoundaryProfile& boundary : proto.boundaries()) {
    profile.boundaries.push_back({.transfer = FromProto(boundary.transfer()),
                                  .late_receives = boundary.late_receives(),
                                  .latency = boundary.latency(),
                                  .bandwidth = boundary.bandwidth(),
                                  .activation_bytes = boundary.activation_bytes(),
                                  .receive_overhead = FromProto(boundary.receive_overhead()),
                                  .same_rank = boundary.same_rank()});
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateProfile(profile));
  return profile;
}

}  // namespace proto_convert

StatusOr<std::string> SerializeProfile(const Profile& profile, ProtoFormat format) {
  v1::Profile proto;
  proto_convert::ToProto(profile, &proto);
  proto_convert::StampFile(FileKind::kProfile, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<Profile> ParseProfile(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::Profile>(
      data, format, FileKind::kProfile, "profile file",
      [](const v1::Profile& proto) { return proto_convert::FromProto(proto); });
}

}  // namespace pipeplan
