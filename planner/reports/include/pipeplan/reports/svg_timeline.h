// SVG timeline: one row per rank, one box per compute action coloured by kind, time to scale.
#pragma once

#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

struct SvgOptions {
  int width = 1200;  // pixels for the whole time axis
  int row_height = 28;
  bool show_labels = true;  // microbatch numbers inside boxes when they fit
  std::string title;
  // The axis runs at least to this time; several timelines drawn with the same value share
  // one axis (0: each timeline's own end).
  double time_end = 0.0;
};

std::string RenderSvgTimeline(const Plan& plan, const Timeline& timeline,
                              const SvgOptions& options);

}  // namespace pipeplan
