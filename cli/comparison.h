// Runs every strategy of the catalogue on one request and lays the results side by side;
// shared by 'pipeplan compare' and 'pipeplan demo'.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/planner/html_report.h"
#include "pipeplan/planner/plan.h"
#include "pipeplan/planner/timeline.h"

namespace pipeplan::cli {

struct ComparisonRow {
  std::string strategy;
  int stages_per_rank = 1;
  std::optional<Plan> plan;          // set when the strategy succeeded
  std::optional<Timeline> timeline;  // set when the strategy succeeded
  std::string error;                 // why it did not, otherwise
  bool best = false;                 // smallest makespan of all rows (ties all marked)
};

// `base` gives P, M, options, memory and the costs of one rank's share of the model. Each
// strategy that accepts V = 1 runs at V = 1; the others run at `multi_stage_v`. Under loop and
// V placement the V stages of a rank split its share, so every stage's compute durations are
// divided by V; dual placement (DualPipe) holds a full share of each of two model copies and
// keeps them. Comm latency is per transfer and stays as is. Rows are in catalogue order.
std::vector<ComparisonRow> RunComparison(const PlanRequest& base, int multi_stage_v);

// The side-by-side table: strategy, V, makespan, zb_bubble_rate, bubble fraction max/mean,
// peak activation memory (max over ranks), gap to the lower bound; '*' marks the best.
std::string RenderComparisonTable(const std::vector<ComparisonRow>& rows);

// One report entry per successful row.
std::vector<ReportEntry> ReportEntries(const std::vector<ComparisonRow>& rows);

// "P=8 M=24; per-rank costs F=18522 B=27423 (I=18086 W=9337) comm=601" for headers.
std::string DescribeRequest(const PlanRequest& base);

}  // namespace pipeplan::cli
