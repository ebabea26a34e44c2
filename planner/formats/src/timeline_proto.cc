// Timeline (and timeline files, which may carry their plan) <-> pipeplan.v1.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/model/text_format.h"
#include "proto_convert.h"

namespace pipeplan {
namespace proto_convert {

namespace {

void ToProto(const ActionTiming& timing, v1::ActionTiming* out) {
  out->set_start(timing.start);
  out->set_end(timing.end);
  out->set_thread(timing.thread);
}

ActionTiming FromProto(const v1::ActionTiming& timing) {
  return {.start = timing.start(), .end = timing.end(), .thread = timing.thread()};
}

}  // namespace

void ToProto(const RankTimeline& rank, v1::RankTimeline* out) {
  out->set_rank(rank.rank.value);
  for (const ActionTiming& timing : rank.actions) ToProto(timing, out->add_actions());
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
  out->set_clock(kOpClocks.ToProto(rank.clock));
  out->set_memory_unit(kMemoryUnits.ToProto(rank.memory_unit));
  for (const ActionMemory& memory : rank.action_memory) {
    v1::ActionMemory* entry = out->add_action_memory();
    entry->set_start(memory.start);
    entry->set_end(memory.end);
    entry->set_peak(memory.peak);
  }
  for (const DiscardedRun& run : rank.discarded) {
    v1::DiscardedRun* entry = out->add_discarded();
    entry->set_action_index(run.action_index);
    ToProto(run.timing, entry->mutable_timing());
  }
  for (const StageStatic& stage : rank.stage_static) {
    v1::StageStatic* entry = out->add_stage_static();
    entry->set_stage(stage.stage.value);
    entry->set_bytes(stage.bytes);
    entry->set_input_bytes(stage.input_bytes);
    entry->set_target_bytes(stage.target_bytes);
    entry->set_gradient_bytes(stage.gradient_bytes);
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

RankTimeline FromProto(const v1::RankTimeline& proto) {
  RankTimeline rank;
  rank.rank = RankId(proto.rank());
  for (const v1::ActionTiming& timing : proto.actions()) rank.actions.push_back(FromProto(timing));
  rank.busy = proto.busy();
  rank.first_start = proto.first_start();
  rank.last_end = proto.last_end();
  rank.peak_activation_memory = proto.peak_activation_memory();
  rank.peak_memory = proto.peak_memory();
  for (const v1::MemorySample& sample : proto.memory()) {
    rank.memory.push_back({.time = sample.time(), .bytes = sample.bytes()});
  }
  for (const v1::ActionMemory& memory : proto.action_memory()) {
    rank.action_memory.push_back(
        {.start = memory.start(), .end = memory.end(), .peak = memory.peak()});
  }
  for (const v1::DiscardedRun& run : proto.discarded()) {
    rank.discarded.push_back({.action_index = static_cast<size_t>(run.action_index()),
                              .timing = FromProto(run.timing())});
  }
  for (const v1::StageStatic& stage : proto.stage_static()) {
    rank.stage_static.push_back({.stage = StageId(stage.stage()),
                                 .bytes = stage.bytes(),
                                 .input_bytes = stage.input_bytes(),
                                 .target_bytes = stage.target_bytes(),
                                 .gradient_bytes = stage.gradient_bytes()});
  }
  return rank;
}

namespace {

bool IsByteCount(double value) { return std::isfinite(value) && value >= 0.0; }

// A stage's static bytes, and the data among them, are byte counts; the data are a part.
Status CheckStageStatic(const v1::StageStatic& stage, const std::string& path) {
  if (stage.stage() < 0) {
    return FieldError(Child(path, "stage"), "must be >= 0, got " + std::to_string(stage.stage()));
  }
  const std::pair<const char*, double> figures[] = {{"bytes", stage.bytes()},
                                                    {"input_bytes", stage.input_bytes()},
                                                    {"target_bytes", stage.target_bytes()},
                                                    {"gradient_bytes", stage.gradient_bytes()}};
  for (const auto& [name, value] : figures) {
    if (!IsByteCount(value)) {
      return FieldError(Child(path, name),
                        "must be a finite number >= 0, got " + FormatNumber(value));
    }
  }
  if (stage.input_bytes() + stage.target_bytes() > stage.bytes()) {
    return FieldError(path, "input_bytes + target_bytes (" +
                                FormatNumber(stage.input_bytes() + stage.target_bytes()) +
                                ") are above bytes (" + FormatNumber(stage.bytes()) +
                                "), of which they are a part");
  }
  return Status::Ok();
}

}  // namespace

// A rank's enums and its measured memory: one entry per action, bytes never negative or NaN.
StatusOr<RankTimeline> CheckedRank(const v1::RankTimeline& proto, const std::string& path) {
  const std::optional<OpClock> clock = kOpClocks.FromProto(proto.clock());
  if (!clock.has_value()) {
    return FieldError(Child(path, "clock"), "unknown op clock " + std::to_string(proto.clock()));
  }
  const std::optional<MemoryUnit> unit = kMemoryUnits.FromProto(proto.memory_unit());
  if (!unit.has_value()) {
    return FieldError(Child(path, "memory_unit"),
                      "unknown memory unit " + std::to_string(proto.memory_unit()));
  }
  if (proto.action_memory_size() != 0 && proto.action_memory_size() != proto.actions_size()) {
    return FieldError(Child(path, "action_memory"),
                      "has " + std::to_string(proto.action_memory_size()) + " entries for " +
                          std::to_string(proto.actions_size()) +
                          " actions (one per action, or none)");
  }
  for (int a = 0; a < proto.action_memory_size(); ++a) {
    const v1::ActionMemory& memory = proto.action_memory(a);
    for (const double value : {memory.start(), memory.end(), memory.peak()}) {
      if (!IsByteCount(value)) {
        return FieldError(Element(Child(path, "action_memory"), a),
                          "memory must be a finite number >= 0, got " + FormatNumber(value));
      }
    }
  }
  for (int s = 0; s < proto.stage_static_size(); ++s) {
    PIPEPLAN_RETURN_IF_ERROR(
        CheckStageStatic(proto.stage_static(s), Element(Child(path, "stage_static"), s)));
  }
  for (int d = 0; d < proto.discarded_size(); ++d) {
    if (proto.discarded(d).action_index() >= static_cast<uint64_t>(proto.actions_size())) {
      return FieldError(Child(Element(Child(path, "discarded"), d), "action_index"),
                        std::to_string(proto.discarded(d).action_index()) +
                            " is not an action of this rank (it has " +
                            std::to_string(proto.actions_size()) + ")");
    }
  }
  RankTimeline rank = FromProto(proto);
  rank.clock = *clock;
  rank.memory_unit = *unit;
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
    PIPEPLAN_ASSIGN_OR_RETURN(RankTimeline rank, CheckedRank(proto.ranks(r), Element("ranks", r)));
    timeline.ranks.push_back(std::move(rank));
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

}  // namespace proto_convert

StatusOr<std::string> SerializeTimeline(const Timeline& timeline, ProtoFormat format) {
  v1::Timeline proto;
  proto_convert::ToProto(timeline, &proto);
  proto_convert::StampFile(FileKind::kTimeline, &proto);
  return proto_convert::Serialize(proto, format);
}

StatusOr<Timeline> ParseTimeline(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::Timeline>(
      data, format, FileKind::kTimeline, "timeline file",
      [](const v1::Timeline& proto) { return proto_convert::FromProto(proto); });
}

StatusOr<std::string> SerializeTimelineFile(const TimelineFile& file, ProtoFormat format) {
  v1::Timeline proto;
  proto_convert::ToProto(file.timeline, &proto);
  proto_convert::StampFile(FileKind::kTimeline, &proto);
  if (file.plan) proto_convert::ToProto(*file.plan, proto.mutable_plan());
  if (file.seconds_per_unit) proto.set_seconds_per_unit(*file.seconds_per_unit);
  return proto_convert::Serialize(proto, format);
}

StatusOr<TimelineFile> ParseTimelineFile(std::string_view data, ProtoFormat format) {
  return proto_convert::ParseAs<v1::Timeline>(
      data, format, FileKind::kTimeline, "timeline file",
      [](const v1::Timeline& proto) -> StatusOr<TimelineFile> {
        TimelineFile file;
        PIPEPLAN_ASSIGN_OR_RETURN(file.timeline, proto_convert::FromProto(proto));
        if (proto.has_plan()) {
          StatusOr<Plan> plan = proto_convert::FromProto(proto.plan());
          if (!plan.ok()) return plan.status().WithContext("plan");
          file.plan = std::move(plan).value();
        }
        const double scale = proto.seconds_per_unit();
        if (scale != 0) {
          if (!std::isfinite(scale) || scale < 0) {
            return proto_convert::FieldError("seconds_per_unit",
                                             "must be a finite number > 0 (or 0 for "
                                             "not recorded), got " +
                                                 FormatNumber(scale));
          }
          file.seconds_per_unit = scale;
        }
        return file;
      });
}

}  // namespace pipeplan
