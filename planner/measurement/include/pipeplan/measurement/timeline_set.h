// Timelines that front ends hand to profile and diff together: each must be of one plan, and a
// profile's of one time scale. The CLI names them by path, the Python package by argument.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// A timeline as read (from a file or an object), named as errors should name it. The pointers
// are borrowed for the call.
struct NamedTimeline {
  std::string name;
  const Timeline* timeline = nullptr;
  const std::optional<Plan>* plan = nullptr;  // the plan the timeline carries, if any
  std::optional<double> seconds_per_unit;     // the time scale it records, if any
};

struct TimelineSetOptions {
  // Said after "carries no plan": how this front end writes a timeline that carries its plan.
  std::string_view how_to_carry_plan;
  // The time scale of timelines that record none (simulated ones are in the plan's cost unit),
  // and how this front end names it.
  std::optional<double> time_scale;
  std::string_view time_scale_name;
  // Profile::source; default "measured", "simulated" or "measured and simulated".
  std::optional<std::string> source;
};

// Pools `timelines` (at least one) into one Profile (BuildProfile): every one must carry the
// first's plan, and have one time scale, its own or options.time_scale.
StatusOr<Profile> ProfileTimelines(std::span<const NamedTimeline> timelines,
                                   const TimelineSetOptions& options);

// The plan an expected and an actual timeline are both of: at least one must carry it, and if
// both do, the same action lists.
StatusOr<Plan> PlanOfBoth(const NamedTimeline& expected, const NamedTimeline& actual,
                          std::string_view how_to_carry_plan);

}  // namespace pipeplan
