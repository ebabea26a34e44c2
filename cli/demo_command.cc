// pipeplan demo: the comparison on an embedded real-world setting (the Zero Bubble paper's
// 1.5B model on 8 ranks) plus an HTML report.
#include <filesystem>
#include <iostream>
#include <string>

#include "commands.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/cli/comparison.h"
#include "pipeplan/reports/html_report.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp = R"(usage: pipeplan demo [--output-dir DIR]

Compares every strategy on the Zero Bubble paper's (ICLR 2024) 1.5B-parameter setting:
P=8 ranks, M=24 microbatches, measured per-stage costs in microseconds F=18522, I=18086,
W=9337 (B = I + W = 27423), 601 us latency per transfer between ranks. Prints the comparison
table (see 'pipeplan compare --help' for the columns) and auto's pick (the fastest plan over
every strategy, V and setting), and writes a self-contained HTML report with one timeline per
strategy and one for auto's pick.

Options:
  --output-dir DIR      where to write index.html (default: pipeplan-report); created if
                        missing
  -h, --help            show this help

Example:
  pipeplan demo && xdg-open pipeplan-report/index.html
)";

constexpr int kRanks = 8;
constexpr int kMicrobatches = 24;
constexpr double kForward = 18522;
constexpr double kBackwardInput = 18086;
constexpr double kBackwardWeight = 9337;
constexpr double kCommLatency = 601;
// The paper's memory model: a microbatch's activation per layer is 34h + 5as (h hidden size,
// a heads, s sequence length), of which W frees 32h, so I frees the rest. Counted in
// microbatch activations of a rank's share (1 per F), as the rest of pipeplan does.
constexpr double kHidden = 2304;
constexpr double kHeads = 24;
constexpr double kSequence = 1024;
constexpr double kActivationUnits = 34 * kHidden + 5 * kHeads * kSequence;
constexpr double kFreedByInput = (kActivationUnits - 32 * kHidden) / kActivationUnits;

struct DemoOptions {
  std::string output_dir = "pipeplan-report";
};

StatusOr<DemoOptions> ParseDemoOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(app::ExpectPositional(flags, 0, ""));
  DemoOptions options;
  if (std::optional<std::string> dir = flags.GetString("output-dir"); dir.has_value()) {
    if (dir->empty()) return InvalidArgument("--output-dir must not be empty");
    options.output_dir = *std::move(dir);
  }
  return options;
}

PlanRequest DemoRequest() {
  PlanRequest request;
  request.topology.ranks = kRanks;
  request.topology.microbatches = kMicrobatches;
  StageCosts stage;
  stage.forward = kForward;
  stage.backward_input = kBackwardInput;
  stage.backward_weight = kBackwardWeight;
  stage.backward = kBackwardInput + kBackwardWeight;
  request.costs.stages = {stage};
  BoundaryCosts boundary;
  boundary.latency = kCommLatency;
  request.costs.boundaries = {boundary};
  request.memory.stages = {StageMemory{1.0, kFreedByInput}};
  return request;
}

Status ExecuteDemo(const DemoOptions& options) {
  const PlanRequest request = DemoRequest();
  std::cout << "Zero Bubble paper, 1.5B model: " << DescribeRequest(request)
            << " (microseconds)\n\n";
  const std::vector<ComparisonRow> rows = RunComparison(request, 2);
  std::cout << RenderComparisonTable(rows);
  // auto searches V and the strategies' settings too; 'pipeplan compare --auto' lists them.
  const StatusOr<AutoResult> auto_result = RunAuto(request, rows);
  std::cout << "\n" << RenderAutoPick(auto_result);

  std::vector<ReportEntry> entries = ReportEntries(rows);
  if (auto_result.ok()) entries.push_back(AutoReportEntry(*auto_result));
  ReportOptions report;
  report.title = "pipeplan demo: Zero Bubble paper, 1.5B model";
  report.subtitle = ReportSubtitle(DescribeRequest(request) + " (microseconds)", rows, entries);
  const std::string path = (std::filesystem::path(options.output_dir) / "index.html").string();
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFileAtomic(path, RenderHtmlReport(entries, report), true));
  std::cout << "\nreport: " << path << " (open it in a browser)\n";
  return Status::Ok();
}

}  // namespace

int RunDemoCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<DemoOptions> kSpec = {
      "demo", kHelp, {{"output-dir"}}, ParseDemoOptions, ExecuteDemo};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
