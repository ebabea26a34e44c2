// Self-contained HTML report (no external assets): a comparison table of plans and their
// metrics, then one SVG timeline per plan.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

struct ReportEntry {
  std::string name;  // usually the strategy
  Plan plan;
  Timeline timeline;
};

struct ReportOptions {
  std::string title = "pipeplan report";
  std::string subtitle;           // e.g. "P=8 M=24, Zero Bubble paper costs"
  bool shared_time_axis = false;  // draw every timeline on one time axis (to compare them)
  // Then every timeline's memory per rank, one curve each, on that axis (svg_memory.h).
  bool memory_curves = false;
};

std::string RenderHtmlReport(const std::vector<ReportEntry>& entries, const ReportOptions& options);

}  // namespace pipeplan
