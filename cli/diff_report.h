// Printing a comparison of two timelines of one plan (simulated vs measured): the text tables
// 'pipeplan run' and 'pipeplan diff' share, and the HTML report with both timelines on one
// time axis.
#pragma once

#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/simulation/timeline_diff.h"

namespace pipeplan::cli {

struct DiffLabels {
  std::string expected = "simulated";
  std::string actual = "measured";
};

// Step time and relative error, then per rank busy/idle, per kind durations and start
// errors, and the compute action whose start is furthest off.
std::string RenderDiffText(const Plan& plan, const TimelineDiff& diff, const DiffLabels& labels);

// The HTML report: both timelines one above the other, on one time axis.
std::string RenderDiffHtml(const Plan& plan, const Timeline& expected, const Timeline& actual,
                           const TimelineDiff& diff, const DiffLabels& labels,
                           const std::string& subtitle);

}  // namespace pipeplan::cli
