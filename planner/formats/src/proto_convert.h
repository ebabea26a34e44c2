// Internals of the protobuf files (formats/src/*_proto.cc): the enum tables, field paths for
// error messages, every domain <-> pipeplan.v1 conversion (one file per message family) and the
// message-generic reading and writing (proto_wire.cc). Parsing is where user files enter, so
// after the protobuf parser accepts a message the conversions check what would otherwise crash
// or mislead domain code (unspecified kinds, negative ids, ids outside the plan's topology) and
// name the field path. Cross-field checks that depend on the final topology (cost and memory
// sizes of a request) are left to the planner, which may still override the topology from
// flags. Every error starts with what was being parsed ("plan file: ...").
#pragma once

#include <google/protobuf/message.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "pipeplan.pb.h"
#include "pipeplan/formats/proto_io.h"

namespace pipeplan::proto_convert {

namespace v1 = ::pipeplan::v1;

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

constexpr EnumTable<FigureOrigin, v1::FigureOrigin, 3> kFigureOrigins = {{{
    {FigureOrigin::kGiven, v1::FIGURE_GIVEN},
    {FigureOrigin::kMeasured, v1::FIGURE_MEASURED},
    {FigureOrigin::kAssumed, v1::FIGURE_ASSUMED},
}}};

constexpr EnumTable<Runtime, v1::Runtime, 5> kRuntimes = {{{
    {Runtime::kAny, v1::RUNTIME_ANY},
    {Runtime::kPipeplanTorch, v1::RUNTIME_PIPEPLAN_TORCH},
    {Runtime::kTorch, v1::RUNTIME_TORCH},
    {Runtime::kTorchtitan, v1::RUNTIME_TORCHTITAN},
    {Runtime::kMegatron, v1::RUNTIME_MEGATRON},
}}};

constexpr EnumTable<FigureScope, v1::FigureScope, 2> kFigureScopes = {{{
    {FigureScope::kStage, v1::FIGURE_SCOPE_STAGE},
    {FigureScope::kRankShare, v1::FIGURE_SCOPE_RANK_SHARE},
}}};

constexpr EnumTable<TimelineSource, v1::TimelineSource, 2> kTimelineSources = {{{
    {TimelineSource::kSimulated, v1::SIMULATED},
    {TimelineSource::kMeasured, v1::MEASURED},
}}};

constexpr EnumTable<OpClock, v1::OpClock, 5> kOpClocks = {{{
    {OpClock::kUnrecorded, v1::OP_CLOCK_UNRECORDED},
    {OpClock::kHost, v1::HOST_CLOCK},
    {OpClock::kCudaEvents, v1::CUDA_EVENTS},
    {OpClock::kProfilerDevice, v1::PROFILER_DEVICE},
    {OpClock::kProfilerHost, v1::PROFILER_HOST},
}}};

constexpr EnumTable<MemoryUnit, v1::MemoryUnit, 2> kMemoryUnits = {{{
    {MemoryUnit::kModel, v1::MEMORY_UNIT_MODEL},
    {MemoryUnit::kBytes, v1::MEMORY_UNIT_BYTES},
}}};

constexpr EnumTable<FileKind, v1::FileKind, 6> kFileKinds = {{{
    {FileKind::kPlan, v1::PLAN},
    {FileKind::kRequest, v1::PLAN_REQUEST},
    {FileKind::kCostModel, v1::COST_MODEL},
    {FileKind::kTimeline, v1::TIMELINE},
    {FileKind::kProfile, v1::PROFILE},
    {FileKind::kLayerCosts, v1::LAYER_COSTS},
}}};

// Field paths for error messages: "programs[2].actions[17].kind".
std::string Child(const std::string& parent, std::string_view field);
std::string Element(const std::string& path, int index);
Status FieldError(const std::string& path, const std::string& message);
Status CheckAtLeast(int value, int minimum, const std::string& path, std::string_view note = "");
// Checks 0 <= value < bound.
Status CheckIndex(int value, int bound, const std::string& path);

// Domain -> proto (cannot fail) and proto -> domain, per message family.
void ToProto(const PlanRequest& request, v1::PlanRequest* out);  // request_proto.cc
void ToProto(const CostModel& costs, v1::CostModel* out);
StatusOr<PlanRequest> FromProto(const v1::PlanRequest& proto, const std::string& path);
StatusOr<CostModel> FromProto(const v1::CostModel& proto, const std::string& path);
void ToProto(const MemoryModel& memory, v1::MemoryModel* out);
StatusOr<MemoryModel> FromProto(const v1::MemoryModel& proto, const std::string& path);
void ToProto(const Plan& plan, v1::Plan* out);  // plan_proto.cc
StatusOr<Plan> FromProto(const v1::Plan& proto);
void ToProto(const Timeline& timeline, v1::Timeline* out);  // timeline_proto.cc
StatusOr<Timeline> FromProto(const v1::Timeline& proto);
void ToProto(const Profile& profile, v1::Profile* out);  // profile_proto.cc
StatusOr<Profile> FromProto(const v1::Profile& proto);

// Writes `message` in `format` (binary output is deterministic); fails on a string that is not
// UTF-8.
StatusOr<std::string> Serialize(const google::protobuf::Message& message, ProtoFormat format);
// Parses `data` into `message`; errors give the line and column for text and JSON. Every double
// read is +0.0 where the input had -0.0 (JSON has one zero).
Status ParseMessage(std::string_view data, ProtoFormat format, google::protobuf::Message* message);

v1::FileKind ToProto(FileKind kind);

// Records the file's kind and the format version in a top-level message.
template <typename ProtoMessage>
void StampFile(FileKind kind, ProtoMessage* proto) {
  proto->set_format_version(kFileFormatVersion);
  proto->set_kind(ToProto(kind));
}

// The kind and version a top-level message (or FileHeader) records; fails on a kind value
// this version does not know.
template <typename ProtoMessage>
StatusOr<FileHeader> HeaderOf(const ProtoMessage& proto) {
  FileHeader header;
  header.format_version = proto.format_version();
  if (!proto.has_kind() || proto.kind() == v1::FILE_KIND_UNSPECIFIED) return header;
  header.kind = kFileKinds.FromProto(proto.kind());
  if (!header.kind.has_value()) {
    return InvalidArgument("unknown file kind " + std::to_string(proto.kind()));
  }
  return header;
}

// Whether a file with `header` may be read as `expected` (see CheckFileKind).
Status CheckHeader(const FileHeader& header, ProtoFormat format, FileKind expected);

// Parses `data` as a `ProtoMessage`, checks the kind it records (CheckHeader) and converts it.
// The kind is read from the parsed message, so a file is parsed once; only when parsing fails
// is the kind read leniently (CheckFileKind), since a file of another kind fails on its fields
// and should say what it is instead. Every error but the kind's starts with `what`.
template <typename ProtoMessage, typename Convert>
auto ParseAs(std::string_view data, ProtoFormat format, FileKind kind, const std::string& what,
             Convert convert) -> decltype(convert(std::declval<const ProtoMessage&>())) {
  ProtoMessage proto;
  if (const Status parsed = ParseMessage(data, format, &proto); !parsed.ok()) {
    PIPEPLAN_RETURN_IF_ERROR(CheckFileKind(data, format, kind));
    return parsed.WithContext(what);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const FileHeader header, HeaderOf(proto));
  PIPEPLAN_RETURN_IF_ERROR(CheckHeader(header, format, kind));
  auto converted = convert(proto);
  if (!converted.ok()) return converted.status().WithContext(what);
  return converted;
}

}  // namespace pipeplan::proto_convert
