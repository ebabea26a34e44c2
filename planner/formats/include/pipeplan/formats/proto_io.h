// Conversion between the domain types and the pipeplan.v1 protobuf schema, and
// (de)serialisation in binary, text and JSON form. The only code that sees generated protos.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

enum class ProtoFormat : uint8_t { kBinary, kText, kJson };

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

}  // namespace pipeplan
