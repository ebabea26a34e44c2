// pipeplan profile: per stage and compute kind the spread of measured durations, and per stage
// boundary the transfer times, from timeline files of one plan ('pipeplan run --timeline').
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/timeline_set.h"
#include "profile_table.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan profile TIMELINE... [-o FILE] [--time-scale S] [--source TEXT] [-q]

Profiles timeline files of one plan, as 'pipeplan run PLAN --timeline FILE' writes them
(binary, text or JSON protobuf; each carries its plan and its time scale). Several files pool
their steps; files of different plans are refused. The profile holds, in seconds:
  per stage and compute kind (F, B, I, W, and F&B overlap cells, which count for the stage
  of their forward half): the number of samples, median, min, max, p10 and p90 of the
  durations (quantiles interpolate linearly between the closest ranks);
  per stage boundary (s to s + 1, both directions): the transfer times. A transfer is timed
  from its send's start to its receive's end, and only when the receive was posted no later
  than the send started (its end is then when the data landed); the others are counted as
  late receives. Post-validation transfers are left out.
'pipeplan calibrate' turns the profile into a cost model. Unless the profile goes to
standard output or -q is given, prints the medians and spreads per stage (in us) and the
transfers per boundary.

Options:
  -o, --output FILE     where to write the Profile: .pb/.bin binary, .json JSON, anything
                        else text format (default: text format on stdout, no table)
  --time-scale S        seconds per unit of timelines that record no time scale (those of
                        'pipeplan simulate --timeline' are in the plan's cost unit); files
                        that record one keep theirs
  --source TEXT         what was measured, kept in the profile (default: "measured" or
                        "simulated", after the timelines)
  -q, --quiet           print nothing on success
  -h, --help            show this help

Examples:
  pipeplan run plan.pb --timeline run1.pb && pipeplan run plan.pb --timeline run2.pb
  pipeplan profile run1.pb run2.pb -o profile.txtpb
  pipeplan simulate plan.pb --timeline sim.pb
  pipeplan profile sim.pb --time-scale 1e-6 -o predicted.txtpb
)";

struct ProfileCommandOptions {
  std::vector<std::string> timelines;
  std::optional<std::string> output;
  std::optional<double> time_scale;
  std::optional<std::string> source;
  bool quiet = false;
};

StatusOr<ProfileCommandOptions> ParseProfileOptions(const app::Flags& flags) {
  if (flags.positional().empty()) {
    return InvalidArgument("missing the timeline files (pipeplan profile TIMELINE...)");
  }
  ProfileCommandOptions options;
  options.timelines = flags.positional();
  options.output = flags.GetString("output");
  PIPEPLAN_ASSIGN_OR_RETURN(options.time_scale, flags.GetNonNegativeDouble("time-scale"));
  if (options.time_scale && *options.time_scale <= 0) {
    return InvalidArgument("--time-scale must be positive");
  }
  options.source = flags.GetString("source");
  options.quiet = flags.GetBool("quiet");
  return options;
}

constexpr std::string_view kHowToCarryPlan = "write it with 'pipeplan run PLAN --timeline FILE'";

Status ExecuteProfile(const ProfileCommandOptions& options) {
  std::vector<TimelineFile> files;
  for (const std::string& path : options.timelines) {
    PIPEPLAN_ASSIGN_OR_RETURN(TimelineFile file,
                              app::LoadProtoFile(path, FileKind::kTimeline, ParseTimelineFile));
    files.push_back(std::move(file));
  }
  std::vector<NamedTimeline> named;
  for (size_t i = 0; i < files.size(); ++i) {
    named.push_back({.name = options.timelines[i],
                     .timeline = &files[i].timeline,
                     .plan = &files[i].plan,
                     .seconds_per_unit = files[i].seconds_per_unit});
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const Profile profile,
                            ProfileTimelines(named, {.how_to_carry_plan = kHowToCarryPlan,
                                                     .time_scale = options.time_scale,
                                                     .time_scale_name = "--time-scale S",
                                                     .source = options.source}));

  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, SerializeProfile(profile, format));
  PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(options.output, data));
  if (to_stdout || options.quiet) return Status::Ok();
  std::cout << RenderProfileTable(profile, TimeUnit::kMicroseconds) << "\nwrote profile ("
            << profile.stages.size() << " stages, " << profile.steps
            << (profile.steps == 1 ? " step" : " steps") << ", source \"" << profile.source
            << "\") to " << *options.output << "\n";
  return Status::Ok();
}

}  // namespace

int RunProfileCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<ProfileCommandOptions> kSpec = {
      "profile",
      kHelp,
      {{"output", app::FlagKind::kValue, 'o'},
       {"time-scale"},
       {"source"},
       {"quiet", app::FlagKind::kBool, 'q'}},
      ParseProfileOptions,
      ExecuteProfile};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
