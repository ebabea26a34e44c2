// SVG memory curves: per rank, what each of several timelines of one plan held over the step
// (their memory samples), one line per timeline, on the time axis svg_timeline draws (same
// margin and width), so that a simulated and a measured step lie one over the other.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/timeline.h"

namespace pipeplan {

struct MemoryCurves {
  std::string name;  // the legend's ("simulated", "measured")
  const Timeline* timeline = nullptr;
};

struct SvgMemoryOptions {
  int width = 1200;       // pixels for the whole time axis, as SvgOptions::width
  int chart_height = 64;  // per rank
  double time_end = 0.0;  // the axis runs at least to this time, as SvgOptions::time_end
};

std::string RenderSvgMemory(const std::vector<MemoryCurves>& curves,
                            const SvgMemoryOptions& options);

}  // namespace pipeplan
