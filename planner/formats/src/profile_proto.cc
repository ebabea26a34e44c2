// Profile <-> pipeplan.v1. Parsing checks the result with ValidateProfile.
#include <string>

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
