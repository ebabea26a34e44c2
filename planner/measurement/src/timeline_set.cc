#include "pipeplan/measurement/timeline_set.h"

#include <vector>

#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

StatusOr<double> TimeScaleOf(const NamedTimeline& timeline, const TimelineSetOptions& options) {
  if (timeline.plan == nullptr || !timeline.plan->has_value()) {
    return InvalidArgument(timeline.name + ": the timeline carries no plan; " +
                           std::string(options.how_to_carry_plan));
  }
  const std::optional<double> scale =
      timeline.seconds_per_unit.has_value() ? timeline.seconds_per_unit : options.time_scale;
  if (!scale.has_value()) {
    return InvalidArgument(timeline.name +
                           ": the timeline records no time scale (a simulated timeline is in "
                           "the plan's cost unit); give " +
                           std::string(options.time_scale_name) + ", the seconds per unit");
  }
  return *scale;
}

std::string DefaultSource(std::span<const NamedTimeline> timelines) {
  bool measured = false;
  bool simulated = false;
  for (const NamedTimeline& timeline : timelines) {
    switch (timeline.timeline->source) {
      case TimelineSource::kMeasured:
        measured = true;
        break;
      case TimelineSource::kSimulated:
        simulated = true;
        break;
    }
  }
  if (measured && simulated) return "measured and simulated";
  return measured ? "measured" : "simulated";
}

}  // namespace

StatusOr<Profile> ProfileTimelines(std::span<const NamedTimeline> timelines,
                                   const TimelineSetOptions& options) {
  if (timelines.empty()) return InvalidArgument("no timeline given");
  const NamedTimeline& first = timelines.front();
  PIPEPLAN_ASSIGN_OR_RETURN(const double first_scale, TimeScaleOf(first, options));
  ProfileOptions profile_options{.seconds_per_unit = first_scale,
                                 .source = options.source.value_or(DefaultSource(timelines)),
                                 .step_names = {}};
  std::vector<Timeline> steps;
  for (const NamedTimeline& timeline : timelines) {
    PIPEPLAN_ASSIGN_OR_RETURN(const double scale, TimeScaleOf(timeline, options));
    if ((*timeline.plan)->programs != (*first.plan)->programs) {
      return InvalidArgument(first.name + " and " + timeline.name +
                             " are timelines of different plans (their action lists differ)");
    }
    if (scale != first_scale) {
      return InvalidArgument(first.name + " and " + timeline.name +
                             " have different time scales (" + FormatNumber(first_scale) + " and " +
                             FormatNumber(scale) +
                             " s per unit): profile the runs of one time scale together");
    }
    profile_options.step_names.push_back(timeline.name);
    steps.push_back(*timeline.timeline);
  }
  return BuildProfile(**first.plan, steps, profile_options);
}

StatusOr<Plan> PlanOfBoth(const NamedTimeline& expected, const NamedTimeline& actual,
                          std::string_view how_to_carry_plan) {
  const bool expected_has = expected.plan != nullptr && expected.plan->has_value();
  const bool actual_has = actual.plan != nullptr && actual.plan->has_value();
  if (!expected_has && !actual_has) {
    return InvalidArgument("neither " + expected.name + " nor " + actual.name +
                           " carries its plan; " + std::string(how_to_carry_plan));
  }
  if (expected_has && actual_has && (*expected.plan)->programs != (*actual.plan)->programs) {
    return InvalidArgument(expected.name + " and " + actual.name +
                           " are timelines of different plans (their action lists differ)");
  }
  return expected_has ? **expected.plan : **actual.plan;
}

}  // namespace pipeplan
