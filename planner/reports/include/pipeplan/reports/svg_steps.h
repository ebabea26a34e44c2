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

// A run's first measured steps, as 'pipeplan run' and 'pipeplan-torch run' draw them with
// --steps-svg: at most three of `steps`, each moved by its start on the run's clock (`starts`,
// in the timelines' unit, as many as the steps), or, where no clock of the run timed them
// (empty `starts`: ranks in processes of their own, each timing a step from the barrier that
// opened it), back to back, which the title says. `name` names the run (the plan's path),
// `first_step` the first measured step's number from 1, `step_barrier` whether a barrier opened
// each step.
struct MeasuredSteps {
  std::string name;
  int first_step = 1;
  bool step_barrier = true;
};
StatusOr<std::string> RenderMeasuredStepsSvg(const Plan& plan, std::span<const Timeline> steps,
                                             std::span<const double> starts,
                                             const MeasuredSteps& run);

}  // namespace pipeplan
