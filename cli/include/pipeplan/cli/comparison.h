// Runs every strategy of the catalogue on one request and lays the results side by side;
// shared by 'pipeplan compare' and 'pipeplan demo'.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/app/request_flags.h"
#include "pipeplan/cli/torch_steps.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/make_plan.h"
#include "pipeplan/reports/html_report.h"

namespace pipeplan::cli {

struct ComparisonRow {
  std::string strategy;
  int stages_per_rank = 1;
  PlanRequest request;            // what was planned: the base at this strategy and V
  std::optional<Evaluated> made;  // the plan and its timeline, when the strategy succeeded
  std::string error;              // why it did not, otherwise
  bool best = false;              // smallest makespan of all rows (ties all marked)
  bool solver_made = false;       // an optimal strategy's row (compare --optimal)
  // A catalogue row's distance to the solver-made row of its placement and V, when there is
  // one: makespan / that row's makespan - 1.
  std::optional<double> gap_to_optimal;
  // What its simulated step rests on that no run measured ("I + W = B"); empty: nothing.
  std::string assumes;
  // Under --runtime torch|torchtitan: its step on torch's runtime from each export.
  std::optional<TorchSteps> torch;
};

// What `pipeplan compare` runs on: the flags' request at V = 1, and the V of the strategies
// that need several stages per rank (--stages-per-rank, else a request file's V if it is at
// least 2, else 2). Errors are the request's, in the flags' terms (app::LoadRequest).
struct ComparisonRequest {
  PlanRequest base;
  int multi_stage_v = 2;
};
StatusOr<ComparisonRequest> LoadComparisonRequest(const app::RequestFlags& flags);

// `base` gives P, M, options, memory and the costs of one rank's share of the model (its
// figures FigureScope::kRankShare, as LoadComparisonRequest makes them; uniform figures of
// kStage are one stage at its V, made a share by MakeRankShare). Each
// strategy that accepts V = 1 runs at V = 1; the others run at `multi_stage_v`. Every stage's
// compute durations (F, B, I, W, overlap) are the share's divided by ChunksPerShare: V under
// loop and V placement, 1 under dual placement (DualPipe holds a full share of each of two
// model copies), as AutoSearch divides them. Comm latency is per transfer and stays as is.
// Rows are in catalogue order; with base.options.post_validation only the strategies that
// support it are run, with base.runtime only those the runtime runs. With `optimal`, the
// solver-made rows follow (optimal at V = 1 and at `multi_stage_v`, optimal-v at V = 2; not with
// post-validation) and every catalogue row gets its gap to the one of its placement and V.
std::vector<ComparisonRow> RunComparison(const PlanRequest& base, int multi_stage_v,
                                         const PlanOptions* optimal = nullptr);

// The side-by-side table: strategy, V, makespan, zb_bubble_rate, bubble fraction max/mean,
// peak activation memory (max over ranks), gap to the lower bound, with post-validation the
// rollback receives, and with solver-made rows the gap to optimal (their own rows: the
// solver's verdict); '*' marks the best.
std::string RenderComparisonTable(const std::vector<ComparisonRow>& rows);

// `auto` on the same request as RunComparison (costs of one rank's share). `rows` are
// RunComparison's for it: a candidate equal to a row's request takes the row's plan and
// timeline instead of being planned and simulated again.
StatusOr<AutoResult> RunAuto(const PlanRequest& base, const std::vector<ComparisonRow>& rows = {});
// "auto picks NAME (V=..): makespan .., peak memory ..; the fastest of N candidates (..)",
// or "auto: failed: <message>"; one line.
std::string RenderAutoPick(const StatusOr<AutoResult>& result);
// The pick line, then every candidate: fastest first with makespan and peak memory, then the
// failures with their reason.
std::string RenderAutoSection(const StatusOr<AutoResult>& result);
// auto's plan as a report entry named "auto -> NAME".
ReportEntry AutoReportEntry(const AutoResult& result);

// The report's subtitle: `description`, the rollback receives of each entry with
// post-validation, then the strategies that could not plan and why (the report has no
// timeline for them).
std::string ReportSubtitle(const std::string& description, const std::vector<ComparisonRow>& rows,
                           const std::vector<ReportEntry>& entries);

// One report entry per successful row, named after its strategy (V has a column of its own).
std::vector<ReportEntry> ReportEntries(const std::vector<ComparisonRow>& rows);

// "P=8 M=24; per-rank costs F=18522 B=27423 (I=18086 W=9337) comm=601" for headers.
std::string DescribeRequest(const PlanRequest& base);

}  // namespace pipeplan::cli
