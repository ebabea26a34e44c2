// pipeplan calibrate: turn a profile ('pipeplan profile') into a cost model file that
// 'pipeplan plan --costs' reads.
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/measurement/merge_profiles.h"
#include "profile_table.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan calibrate PROFILE [PROFILE ...] [-o FILE] [--unit s|ms|us|ns] [--uniform]
                           [--input-share X] [-q]

Turns a profile ('pipeplan profile', binary, text or JSON protobuf) into a CostModel file for
'pipeplan plan --costs', 'import --costs' and 'compare --costs'. Every figure but the
receive overhead is a median of the profile converted to --unit. Per stage:
  F        measured (a stage without F, or without any sample, is an error naming it)
  B        measured; else I + W (assumed)
  I, W     measured, both or neither; neither: I = X B (--input-share), W = B - I (assumed)
  overlap  measured; else 0, which the cost model reads as F + B of the cell (assumed)
The file records per stage which figures were measured, in which run, and which assumed;
'plan', 'compare' and 'auto' say where a ranking rests on an assumed figure.

Several profiles of different plans of one model, run in one runtime, calibrate together:
each figure comes from the profile that measured it (the most samples), so B from a 1f1b
run and I and W from a zb-h1 run are both measured. They must cut and place the model alike
(the same P x V, loop beside loop, V shape beside V shape).
Per boundary: latency = the median clean transfer and bandwidth 0 (infinite), since one
message size per boundary cannot separate the two; a profiler's own latency and bandwidth
where the profile has them. A boundary without a clean transfer (a same-rank hand-off, or
only late receives) gets the mean of the measured boundaries, 0 if none. The receive
overhead is the mean (not the median: a step adds up its tail) of the profile's receives
posted after their data landed; where none was, the mean of the boundaries that have one.
Unless the cost model goes to standard output or -q is given, prints the costs per stage
(with the spread of the measured ones) and per boundary, marking what was derived.

Options:
  -o, --output FILE     where to write the cost model: .pb/.bin binary, .json JSON,
                        anything else text format (default: text format on stdout, no table)
  --unit U              time unit of the cost model: s, ms, us or ns (default us, the unit
                        of the demo)
  --uniform             every stage the same figures: the means over the stages (overlap:
                        over the stages that measured one) and over the measured boundaries,
                        still one entry per stage, so that plans of another cut (another V
                        or P, 'compare', 'auto') get them cut again by depth
  --input-share X       the share of B that is I when the profile has no I and W, in [0, 1]
                        (default 0.5, what a cost file with only B means too)
  -q, --quiet           print nothing on success
  -h, --help            show this help

Examples:
  pipeplan profile measured.pb -o profile.txtpb
  pipeplan calibrate profile.txtpb -o costs.txtpb
  pipeplan plan --strategy zbv --ranks 4 --microbatches 8 --costs costs.txtpb -o plan.pb
  pipeplan calibrate profile.txtpb --uniform --unit ms -o uniform.json
  pipeplan calibrate 1f1b-profile.json zb-h1-profile.json -o costs.json
)";

struct CalibrateCommandOptions {
  std::vector<std::string> profile_paths;
  std::optional<std::string> output;
  CalibrateOptions calibrate;
  bool quiet = false;
};

std::string JoinPaths(const std::vector<std::string>& paths) {
  std::string joined;
  for (const std::string& path : paths) joined += (joined.empty() ? "" : ", ") + path;
  return joined;
}

// "runs: [0] 1f1b P=2 V=1 M=8, torch cpu (F, B); [1] zb-h1 P=2 V=1 M=8, torch cpu (I, W)":
// which run each stage's figures came from, stage 0's as the example.
std::string RenderRuns(const CostModel& costs) {
  std::string out = "figures by run (stage 0):\n";
  for (size_t run = 0; run < costs.runs.size(); ++run) {
    std::string kinds;
    const auto add = [&](const FigureSource& source, const char* name) {
      if (source.origin != FigureOrigin::kMeasured || source.run != static_cast<int>(run)) return;
      kinds += (kinds.empty() ? "" : ", ") + std::string(name);
    };
    if (!costs.sources.empty()) {
      const StageSources& stage = costs.sources.front();
      add(stage.forward, "F");
      add(stage.backward, "B");
      add(stage.backward_input, "I");
      add(stage.backward_weight, "W");
      add(stage.overlap, "F&B cell");
    }
    out += "  [" + std::to_string(run) + "] " + costs.runs[run] + ": " +
           (kinds.empty() ? "nothing taken" : kinds) + "\n";
  }
  return out;
}

StatusOr<CalibrateCommandOptions> ParseCalibrateOptions(const app::Flags& flags) {
  if (flags.positional().empty()) {
    return InvalidArgument("missing the profile file (pipeplan calibrate PROFILE [PROFILE ...])");
  }
  CalibrateCommandOptions options;
  options.profile_paths = flags.positional();
  options.output = flags.GetString("output");
  if (const std::optional<std::string> unit = flags.GetString("unit")) {
    const std::optional<TimeUnit> parsed = TimeUnitFromName(*unit);
    if (!parsed) return InvalidArgument("--unit: unknown unit '" + *unit + "' (s, ms, us or ns)");
    options.calibrate.unit = *parsed;
  }
  options.calibrate.uniform = flags.GetBool("uniform");
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> share,
                            flags.GetNonNegativeDouble("input-share"));
  if (share && *share > 1) return InvalidArgument("--input-share must be in [0, 1]");
  options.calibrate.input_share = share.value_or(options.calibrate.input_share);
  options.quiet = flags.GetBool("quiet");
  return options;
}

Status ExecuteCalibrate(const CalibrateCommandOptions& options) {
  std::vector<Profile> profiles;
  for (const std::string& path : options.profile_paths) {
    PIPEPLAN_ASSIGN_OR_RETURN(Profile profile,
                              app::LoadProtoFile(path, FileKind::kProfile, ParseProfile));
    profiles.push_back(std::move(profile));
  }
  // The table shows the figures calibrate took: each from the profile that measured it.
  StatusOr<MergedProfile> merged = MergeProfiles(profiles);
  if (!merged.ok()) return merged.status().WithContext(JoinPaths(options.profile_paths));
  StatusOr<CostModel> costs = Calibrate(*merged, options.calibrate);
  if (!costs.ok()) return costs.status().WithContext(JoinPaths(options.profile_paths));
  const Profile& profile = merged->profile;

  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, SerializeCostModel(*costs, format));
  PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(options.output, data));
  if (to_stdout || options.quiet) return Status::Ok();
  std::cout << JoinPaths(options.profile_paths) << ": " << profile.stages.size() << " stages, "
            << profile.steps << (profile.steps == 1 ? " step" : " steps") << ", source \""
            << profile.source << "\"\n";
  if (profiles.size() > 1) std::cout << RenderRuns(*costs);
  std::cout << RenderCalibrationTable(profile, *costs, options.calibrate) << "\nwrote "
            << (options.calibrate.uniform ? "uniform" : "per-stage") << " cost model to "
            << *options.output << "\n";
  return Status::Ok();
}

}  // namespace

int RunCalibrateCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<CalibrateCommandOptions> kSpec = {
      "calibrate",
      kHelp,
      {{"output", app::FlagKind::kValue, 'o'},
       {"unit"},
       {"uniform", app::FlagKind::kBool},
       {"input-share"},
       {"quiet", app::FlagKind::kBool, 'q'}},
      ParseCalibrateOptions,
      ExecuteCalibrate};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
