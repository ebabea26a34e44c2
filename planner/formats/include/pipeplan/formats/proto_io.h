// Conversion between the domain types and the pipeplan.v1 protobuf schema, and
// (de)serialisation in binary, text and JSON form. The only code that sees generated protos.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/model/layer_costs.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

enum class ProtoFormat : uint8_t { kBinary, kText, kJson };

// What a pipeplan file holds. Every Serialize* below records it in the file (with the format
// version), and every Parse* checks it: the wrong kind, or a binary file that records none, is
// refused, also where the file's fields would not parse as the kind expected. Text and JSON
// without a kind (written by hand) are read.
enum class FileKind : uint8_t { kPlan, kRequest, kCostModel, kTimeline, kProfile, kLayerCosts };

// "plan", "request", "cost model", "timeline", "profile", "layer costs".
std::string_view FileKindName(FileKind kind);

// The format version written into every file; files of a newer version are refused.
inline constexpr uint32_t kFileFormatVersion = 1;

struct FileHeader {
  std::optional<FileKind> kind;  // nullopt: none recorded
  uint32_t format_version = 0;   // 0: none recorded
};

// The kind and version `data` records. Fails only when `data` is not a protobuf message in
// `format` at all (the full parse then says where).
StatusOr<FileHeader> ReadFileHeader(std::string_view data, ProtoFormat format);

// Whether `data` may be read as `expected`: not when it records another kind ("is a timeline
// file, not a plan file"), a newer format version, or, in binary, no kind at all. Data that is
// not protobuf passes (the full parse reports it).
Status CheckFileKind(std::string_view data, ProtoFormat format, FileKind expected);

// Guesses the format from a file name (".pb"/".bin", ".textproto"/".txtpb"/".pbtxt", ".json"),
// falling back on content (a leading '{' is JSON, printable text is text format).
ProtoFormat DetectProtoFormat(std::string_view path, std::string_view content);

StatusOr<std::string> SerializePlan(const Plan& plan, ProtoFormat format);
StatusOr<Plan> ParsePlan(std::string_view data, ProtoFormat format);

StatusOr<std::string> SerializeRequest(const PlanRequest& request, ProtoFormat format);
StatusOr<PlanRequest> ParseRequest(std::string_view data, ProtoFormat format);

StatusOr<std::string> SerializeCostModel(const CostModel& costs, ProtoFormat format);
StatusOr<CostModel> ParseCostModel(std::string_view data, ProtoFormat format);

StatusOr<std::string> SerializeTimeline(const Timeline& timeline, ProtoFormat format);
StatusOr<Timeline> ParseTimeline(std::string_view data, ProtoFormat format);

// A timeline file may carry the plan it is a timeline of ('simulate --timeline' and 'run
// --timeline' write it), so that it can be read, diffed and drawn on its own.
// 'run --timeline' also records its time scale, so that the times can be read as seconds.
struct TimelineFile {
  Timeline timeline;
  std::optional<Plan> plan;
  std::optional<double> seconds_per_unit = std::nullopt;  // wall-clock s per unit of the times
};
StatusOr<std::string> SerializeTimelineFile(const TimelineFile& file, ProtoFormat format);
StatusOr<TimelineFile> ParseTimelineFile(std::string_view data, ProtoFormat format);

// Parsing checks the result with ValidateProfile.
StatusOr<std::string> SerializeProfile(const Profile& profile, ProtoFormat format);
StatusOr<Profile> ParseProfile(std::string_view data, ProtoFormat format);

// Parsing checks the result with ValidateLayerCosts. A hand-written JSON file needs no header:
// {"layers": [{"name": "layers.0", "forward": 1.2, "backward": 2.5}], "time_unit": "ms"}.
StatusOr<std::string> SerializeLayerCosts(const LayerCosts& layers, ProtoFormat format);
StatusOr<LayerCosts> ParseLayerCosts(std::string_view data, ProtoFormat format);

}  // namespace pipeplan
