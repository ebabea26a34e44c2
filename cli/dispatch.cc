// The pipeplan command's dispatch: the subcommand named by the first word runs. Each
// subcommand lives in its own file.
#include "pipeplan/app/dispatch.h"

#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "pipeplan/app/files.h"
#include "pipeplan/cli/main.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan::cli {
namespace {

constexpr app::Subcommand kSubcommands[] = {
    {"plan", "build a validated plan from a strategy and costs", RunPlanCommand},
    {"simulate", "simulate a plan: metrics, Chrome trace, SVG, HTML", RunSimulateCommand},
    {"export", "convert a plan to torch CSV, text or JSON", RunExportCommand},
    {"import", "turn a torch CSV schedule into a validated plan", RunImportCommand},
    {"compare", "every strategy side by side on one request", RunCompareCommand},
    {"partition", "choose each stage's layers with the strategy, from per-layer costs",
     RunPartitionCommand},
    {"run", "execute a plan, time every action, compare with the simulation", RunRunCommand},
    {"diff", "compare two timelines of a plan (simulated vs measured)", RunDiffCommand},
    {"profile", "per stage and kind the spread of measured durations, from timelines",
     RunProfileCommand},
    {"calibrate", "a profile to a cost model for 'plan --costs'", RunCalibrateCommand},
    {"demo", "the comparison on the Zero Bubble paper's setting + HTML report", RunDemoCommand},
};

constexpr std::string_view kAbout =
    "Plans pipeline-parallel training schedules (1F1B, interleaved, zero bubble, ...),\n"
    "simulates them and exports them for PyTorch.\n";

constexpr std::string_view kEpilogue =
    "Exit codes: 0 success, 1 invalid input (bad file, invalid plan, impossible request),\n"
    "2 usage error (unknown command or flag, missing or malformed value).\n"
    "\n"
    "Examples:\n"
    "  pipeplan demo\n"
    "  pipeplan plan --strategy 1f1b --ranks 4 --microbatches 8 -o plan.pb\n"
    "  pipeplan simulate plan.pb --html report.html\n"
    "  pipeplan compare --ranks 8 --microbatches 24\n"
    "  pipeplan run plan.pb --html run.html\n";

}  // namespace

int Main(const std::vector<std::string>& words) {
  // In a process that runs several commands (the Python package), a file an earlier one read
  // is not this one's input.
  app::ForgetInputFiles();
  const std::string_view version = ToolVersion();
  return app::Dispatch({.name = "pipeplan",
                        .about = kAbout,
                        .commands = kSubcommands,
                        .epilogue = kEpilogue,
                        .version = version},
                       words);
}

}  // namespace pipeplan::cli
