// pipeplan compare: every strategy of the catalogue on the same request, side by side.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/cli/comparison.h"
#include "pipeplan/reports/html_report.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan compare --ranks P --microbatches M [options] [--auto] [--html FILE]
       pipeplan compare --request FILE [--auto] [--html FILE]

Plans and simulates every strategy of the catalogue on the same request and prints them side
by side in catalogue order: strategy, V, makespan, zb_bubble_rate, bubble fraction max and
mean, peak activation memory (max over ranks) and the gap to the lower bound. '*' marks the
smallest makespan. Strategies that cannot plan the request (e.g. zb-h2 with M < 2P, a memory
limit too small) are listed with the reason instead of numbers.

Strategies that accept V = 1 run at V = 1; the others run at --stages-per-rank. The
durations describe one rank's share of the model: a strategy that splits that share into V
stages (loop or V placement) gets 1/V of each compute duration (F, B, I, W, overlap) per
stage, so every row models the same network; DualPipe's dual placement holds a full share of
each of two model copies and keeps the durations. The comm latency is per transfer and is
never divided. 'pipeplan plan --strategy auto' splits the durations the same way.
Per-stage costs or memory (--costs with an entry per stage, as 'pipeplan calibrate' writes)
describe one cut of the model: used as they are where a row has that many stages, cut again
by depth where it has another number (an estimate: a profiled stage's layers are taken to
cost alike; profile a plan with that V to measure it).

Request:
  --ranks P                    pipeline-parallel ranks, integer >= 1; required
  --microbatches M             microbatches per step, integer >= 1; required
  --stages-per-rank V          V for the strategies that need V > 1, integer >= 1 (default 2)
  --microbatch-group-size G    interleaved-1f1b microbatch group size (default P)
  --memory-limit X             per-rank memory limit in the memory model's unit (microbatch
                               activations of one rank's share by default; 1F1B peaks at P);
                               strategies that need more are listed as failed (default: none)
  --post-validation            compare the zero-bubble family with post-validation (PV) and
                               rollback tagging; the table gets a 'rollback RECVs' column and
                               the other strategies are left out
  --runtime NAME               only what this runtime runs: pipeplan-torch, torch, torchtitan
                               or megatron (see 'pipeplan plan --help'; default: every strategy);
                               torch and torchtitan add the columns 'torch: csv-comms' and
                               'torch: csv', each row's step on torch's runtime from either
                               export (as 'pipeplan simulate --runtime torch' times it)
  --request FILE               take P, M, costs and memory from a PlanRequest file (text or
                               JSON); its strategy is ignored; excludes the flags above

Costs (durations of one rank's share of the model in your time unit, numbers >= 0):
  --forward T                  F (default 1)
  --backward T                 B (default I + W)
  --backward-input T           I (default B - W, or B/2 when only B is given; 1 by default)
  --backward-weight T          W (default B - I, or B/2 when only B is given; 1 by default)
  --overlap T                  one F&B overlap cell, number > 0 (default F + B)
  --comm T                     latency of one transfer between ranks (default 0)
  --receive-overhead T         time a receive takes once posted, data there or not (default 0)
  --costs FILE                 a CostModel file (text, JSON or binary protobuf) instead

Output:
  --auto                       also run 'auto' on the same request and print its pick and every
                               candidate it tried (strategy, V, group size or memory step,
                               makespan, peak memory; fastest first, then the failures and why)
  --optimal                    also plan optimal (V = 1 and V = --stages-per-rank) and optimal-v
                               with the CP-SAT solver, and add a 'gap to optimal' column: each
                               strategy's makespan against the solver's plan of the same
                               placement and V ('-' where there is none), and for the solver's
                               rows 'optimal' or how far above the optimum they may be
  --time-limit SEC             with --optimal: each solve's budget in CP-SAT's deterministic
                               seconds, number > 0 (default 60; see 'pipeplan plan --help')
  --html FILE                  also write a self-contained HTML report (table and one timeline
                               per strategy; with --auto, auto's pick too)
  -h, --help                   show this help

Strategies:
@STRATEGIES@

Examples:
  pipeplan compare --ranks 4 --microbatches 8
  pipeplan compare --ranks 4 --microbatches 8 --memory-limit 4 --auto
  pipeplan compare --ranks 4 --microbatches 8 --memory-limit 2.5 --optimal --time-limit 20
  pipeplan compare --ranks 4 --microbatches 8 --post-validation
  pipeplan compare --ranks 8 --microbatches 24 --forward 18522 --backward-input 18086 \
      --backward-weight 9337 --comm 601 --html report.html
)";

struct CompareOptions {
  app::RequestFlags request;
  bool with_auto = false;
  bool with_optimal = false;
  std::optional<double> time_limit_s;
  std::optional<std::string> html;
};

std::vector<app::FlagSpec> CompareFlags() {
  std::vector<app::FlagSpec> specs = {{"request"},
                                      {"html"},
                                      {"auto", app::FlagKind::kBool},
                                      {"optimal", app::FlagKind::kBool},
                                      {"time-limit"}};
  for (const app::FlagSpec& spec : app::TopologyFlagSpecs()) specs.push_back(spec);
  for (const app::FlagSpec& spec : app::CostFlagSpecs()) specs.push_back(spec);
  return specs;
}

StatusOr<CompareOptions> ParseCompareOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(app::ExpectPositional(flags, 0, ""));
  CompareOptions options;
  PIPEPLAN_ASSIGN_OR_RETURN(options.request,
                            app::ParseRequestFlags(flags, app::StrategyFlag::kNone));
  options.with_auto = flags.GetBool("auto");
  options.with_optimal = flags.GetBool("optimal");
  PIPEPLAN_ASSIGN_OR_RETURN(options.time_limit_s, app::ParseTimeLimitFlag(flags));
  if (options.time_limit_s.has_value() && !options.with_optimal) {
    return InvalidArgument("--time-limit needs --optimal");
  }
  if (options.with_optimal && options.request.post_validation) {
    return InvalidArgument(
        "--optimal cannot be combined with --post-validation (the "
        "solver-made strategies do not insert post-validation)");
  }
  options.html = flags.GetString("html");
  return options;
}

Status ExecuteCompare(const CompareOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const ComparisonRequest request,
                            LoadComparisonRequest(options.request));
  const PlanRequest& base = request.base;
  PlanOptions optimal{.solve = app::RunCpSat};
  if (options.time_limit_s.has_value()) optimal.solver.time_limit_s = *options.time_limit_s;
  std::vector<ComparisonRow> rows =
      RunComparison(base, request.multi_stage_v, options.with_optimal ? &optimal : nullptr);
  for (ComparisonRow& row : rows) row.error = app::InFlagTerms(row.error, options.request);
  const std::string description = DescribeRequest(base);
  std::cout << description << "\n\n" << RenderComparisonTable(rows);

  std::optional<StatusOr<AutoResult>> auto_result;
  if (options.with_auto) {
    auto_result = RunAuto(base, rows);
    if (!auto_result->ok()) *auto_result = app::InFlagTerms(auto_result->status(), options.request);
    std::cout << "\n" << RenderAutoSection(*auto_result);
  }

  const bool any_ok = std::any_of(rows.begin(), rows.end(),
                                  [](const ComparisonRow& row) { return row.made.has_value(); });
  if (!any_ok) return FailedPrecondition("no strategy could plan this request");
  if (options.html.has_value()) {
    std::vector<ReportEntry> entries = ReportEntries(rows);
    if (auto_result.has_value() && auto_result->ok()) {
      entries.push_back(AutoReportEntry(**auto_result));
    }
    ReportOptions report;
    report.title = "pipeplan compare";
    report.subtitle = ReportSubtitle(description, rows, entries);
    PIPEPLAN_RETURN_IF_ERROR(
        app::WriteFileAtomic(*options.html, RenderHtmlReport(entries, report), true));
    std::cout << "wrote " << *options.html << "\n";
  }
  return Status::Ok();
}

}  // namespace

int RunCompareCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<CompareOptions> kSpec = {"compare", kHelp, CompareFlags(),
                                                         ParseCompareOptions, ExecuteCompare};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
