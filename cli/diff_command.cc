// pipeplan diff: compare two timelines of one plan, typically the simulated one ('pipeplan
// simulate --timeline') and a measured one ('pipeplan run --timeline').
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "diff_report.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/simulation/timeline_diff.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan diff SIMULATED MEASURED [--html FILE]

Compares two timeline files of the same plan, as written by 'pipeplan simulate PLAN
--timeline FILE' and 'pipeplan run PLAN --timeline FILE' (binary, text or JSON protobuf;
each carries its plan). Prints both step times and the relative error, per rank busy and
idle time, per action kind the mean durations and start errors, and the compute action
whose start is furthest off. Times are in the plan's unit.

Options:
  --html FILE           write an HTML report: both timelines one above the other on one
                        time axis
  -h, --help            show this help

Examples:
  pipeplan simulate plan.pb --timeline simulated.pb
  pipeplan run plan.pb --timeline measured.pb
  pipeplan diff simulated.pb measured.pb --html diff.html
)";

struct DiffOptions {
  std::string expected_path;
  std::string actual_path;
  std::optional<std::string> html;
};

StatusOr<DiffOptions> ParseDiffOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(
      app::ExpectPositional(flags, 2, "two timeline files (pipeplan diff SIMULATED MEASURED)"));
  return DiffOptions{flags.positional()[0], flags.positional()[1], flags.GetString("html")};
}

StatusOr<TimelineFile> LoadTimelineFile(const std::string& path) {
  return app::LoadProtoFile(path, FileKind::kTimeline, ParseTimelineFile);
}

// The plan both timelines are of: they must carry one, and the same order if both do.
StatusOr<Plan> CommonPlan(const DiffOptions& options, const TimelineFile& expected,
                          const TimelineFile& actual) {
  if (!expected.plan && !actual.plan) {
    return InvalidArgument(
        "neither timeline file carries its plan; write them with 'pipeplan simulate PLAN "
        "--timeline FILE' and 'pipeplan run PLAN --timeline FILE'");
  }
  if (expected.plan && actual.plan && expected.plan->programs != actual.plan->programs) {
    return InvalidArgument(options.expected_path + " and " + options.actual_path +
                           " are timelines of different plans (their action lists differ)");
  }
  return expected.plan ? *expected.plan : *actual.plan;
}

Status ExecuteDiff(const DiffOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineFile expected, LoadTimelineFile(options.expected_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineFile actual, LoadTimelineFile(options.actual_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const Plan plan, CommonPlan(options, expected, actual));
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineDiff diff,
                            DiffTimelines(plan, expected.timeline, actual.timeline));
  const DiffLabels labels;
  if (options.html) {
    PIPEPLAN_RETURN_IF_ERROR(
        app::WriteFileAtomic(*options.html,
                             RenderDiffHtml(plan, expected.timeline, actual.timeline, diff, labels,
                                            options.expected_path + " vs " + options.actual_path),
                             true));
  }
  std::cout << options.expected_path << " (" << labels.expected << ") vs " << options.actual_path
            << " (" << labels.actual << ")\n\n"
            << RenderDiffText(plan, diff, labels);
  if (options.html) std::cout << "wrote " << *options.html << "\n";
  return Status::Ok();
}

}  // namespace

int RunDiffCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<DiffOptions> kSpec = {
      "diff", kHelp, {{"html"}}, ParseDiffOptions, ExecuteDiff};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
