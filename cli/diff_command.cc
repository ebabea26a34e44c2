// pipeplan diff: compare two timelines of one plan, typically the simulated one ('pipeplan
// simulate --timeline') and a measured one ('pipeplan run --timeline').
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commands.h"
#include "diff_report.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/timeline_set.h"
#include "pipeplan/simulation/timeline_diff.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan diff SIMULATED MEASURED [--html FILE]

Compares two timeline files of the same plan, as written by 'pipeplan simulate PLAN
--timeline FILE' and 'pipeplan run PLAN --timeline FILE' (binary, text or JSON protobuf;
each carries its plan). Each file records whether it was simulated or measured: given the
other way round, they are compared as simulated vs measured all the same (with a note); two
of one kind are labelled first and second. Prints both step times and the relative error, per rank busy and
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

NamedTimeline NamedOf(const std::string& path, const TimelineFile& file) {
  return {.name = path, .timeline = &file.timeline, .plan = &file.plan, .seconds_per_unit = {}};
}

// Each timeline says whether it was simulated or measured: a measured one given first is
// compared as the second (the error is always measured against simulated), with a note; two
// of one kind are labelled by their order.
DiffLabels OrderBySource(DiffOptions& options, TimelineFile& expected, TimelineFile& actual,
                         std::string& note) {
  const TimelineSource first = expected.timeline.source;
  const TimelineSource second = actual.timeline.source;
  if (first == TimelineSource::kMeasured && second == TimelineSource::kSimulated) {
    note = options.expected_path + " is measured and " + options.actual_path +
           " simulated: comparing " + options.actual_path + " (simulated) with " +
           options.expected_path + " (measured)";
    std::swap(options.expected_path, options.actual_path);
    std::swap(expected, actual);
    return {};
  }
  if (first == second) {
    note = "both timelines are " + std::string(TimelineSourceName(first)) +
           ": labelled first and second";
    return {.expected = "first", .actual = "second"};
  }
  return {};
}

Status ExecuteDiff(const DiffOptions& given) {
  DiffOptions options = given;
  PIPEPLAN_ASSIGN_OR_RETURN(TimelineFile expected, LoadTimelineFile(options.expected_path));
  PIPEPLAN_ASSIGN_OR_RETURN(TimelineFile actual, LoadTimelineFile(options.actual_path));
  std::string note;
  const DiffLabels labels = OrderBySource(options, expected, actual, note);
  PIPEPLAN_ASSIGN_OR_RETURN(
      const Plan plan,
      PlanOfBoth(NamedOf(options.expected_path, expected), NamedOf(options.actual_path, actual),
                 "write them with 'pipeplan simulate PLAN --timeline FILE' and 'pipeplan run "
                 "PLAN --timeline FILE'"));
  if (!note.empty()) app::PrintNote(note);
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineDiff diff,
                            DiffTimelines(plan, expected.timeline, actual.timeline));
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
