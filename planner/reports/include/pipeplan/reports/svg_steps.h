// Consecutive measured steps of one run on one time axis: where a run without a step barrier
// lets step k + 1's first actions start over step k's tail, the picture shows it.
#pragma once

#include <span>
#include <string>
#include <utility>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/reports/svg_timeline.h"

namespace pipeplan {

// `steps` (timelines of `plan`) as one plan and timeline: step k's actions follow the plan's,
// its microbatch m numbered k M + m, its times moved by offsets[k] (in the timelines' unit,
// from the first step's time zero). Fails where the sizes disagree (steps and offsets, a
// step's ranks or actions and the plan's programs).
StatusOr<std::pair<Plan, Timeline>> ConsecutiveSteps(const Plan& plan,
                                                     std::span<const Timeline> steps,
                                                     std::span<const double> offsets);

// ConsecutiveSteps drawn as RenderSvgTimeline draws one step.
StatusOr<std::string> RenderSvgSteps(const Plan& plan, std::span<const Timeline> steps,
                                     std::span<const double> offsets, const SvgOptions& options);

}  // namespace pipeplan
