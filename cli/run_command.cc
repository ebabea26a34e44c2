// pipeplan run: execute a plan with the runtime (every rank a thread of this process), time
// every action, and compare the measured step with the simulated one.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "diff_report.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/plan_util.h"
#include "pipeplan/reports/svg_steps.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/synthetic_run.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/simulation/timeline_diff.h"
#include "pipeplan/simulation/timeline_metrics.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan run PLAN [--executor synthetic] [--transport inproc] [--steps N]
                     [--warmup K] [--time-scale S] [--timeout SEC] [--timeline FILE]
                     [--html FILE] [--steps-svg FILE] [--no-step-barrier] [--check-cost UNITS]
                     [--inject-fault KIND@RANK:ACTION[:STEP]]
                     [--inject-validation-failure STEP]

Executes a plan file with the pipeplan runtime, every rank as a thread of this process, and
times every action. Prints the measured step time (median over the measured steps) next to
the simulated one and their relative error, then per rank busy and idle time and per action
kind the mean durations and start errors (times in the plan's unit).

Before launch the plan is validated and dry-run: a plan that is incomplete or would deadlock
is refused with the reason (the cycle of waiting ranks). During a step a watchdog turns a
rank that makes no progress for --timeout seconds into an error naming the rank, the action
and what it waits for; any failure stops every rank. Exit code 1 for all of these.

Options:
  --executor NAME       synthetic (the only one in this build): holds each compute action
                        for its modelled duration times the time scale, and models every
                        transfer's latency and bandwidth the same way
  --transport NAME      inproc (the only one in this build): ranks are threads
  --steps N             measured steps (default 5)
  --warmup K            steps run first and not measured (default 1)
  --time-scale S        wall-clock seconds per unit of the plan's costs (default: chosen so
                        the mean compute action lasts 3 ms)
  --timeout SEC         watchdog: seconds without progress before a step fails (default 30)
  --timeline FILE       write the measured timeline of the median step, with the plan and
                        the time scale (binary, text or JSON protobuf by extension; read by
                        'pipeplan diff' and 'pipeplan profile')
  --html FILE           write an HTML report: simulated and measured timelines one above the
                        other on one time axis
  --steps-svg FILE      write an SVG of the first three measured steps one after another on
                        the run's clock (step k's microbatch m labelled kM + m): with
                        --no-step-barrier, where step k+1's first actions ran over step
                        k's tail
  --no-step-barrier     start each rank's next step as soon as it ended its last (default:
                        every step opens on all ranks at once): step k+1's first actions
                        overlap step k's tail where their inputs allow. The median step
                        printed is then what each step adds to the run (from the previous
                        step's last action to its own); the table compares one step's
                        timeline, timed from its earliest rank's start
  --check-cost UNITS    model the optimizer's global check (clipping to a global norm, the
                        non-finite skip): every step ends with the gradient-state exchange
                        and a synchronous update then holds UNITS (the check's all-reduce);
                        with post-validation in the plan the update is speculative and
                        does not wait for it (compare the two with --no-step-barrier)
  --inject-fault F      testing aid: make one action misbehave, to see the watchdog and
                        the abort at work. F = KIND@RANK:ACTION[:STEP] with KIND fail (an
                        error), throw (an exception) or stall (never returns) on a compute
                        action, or truncate (half the bytes: a malformed message) on a
                        send; ACTION is the index in the rank's program, STEP counts
                        warm-up steps from 0
  --inject-validation-failure STEP
                        testing aid for plans with post-validation: the PV of step STEP
                        (from 1, warm-up steps included) fails, as a clipped or skipped
                        step's would: every rank takes the stale messages of its receives
                        tagged rollback and runs the forwards before its PV again. The
                        step's time is printed beside the others', and the table,
                        --timeline and --html show that step (first runs hatched)
  -h, --help            show this help

Examples:
  pipeplan plan --strategy 1f1b --ranks 4 --microbatches 8 -o plan.pb
  pipeplan run plan.pb
  pipeplan run plan.pb --steps 10 --time-scale 0.002 --timeline measured.pb --html run.html
  pipeplan run plan.pb --timeout 1 --inject-fault stall@2:7
  pipeplan plan --strategy zbv --ranks 4 --microbatches 8 --post-validation -o zbv.pb
  pipeplan run zbv.pb --inject-validation-failure 3
  pipeplan run zbv.pb --no-step-barrier --check-cost 2 --steps 20 --steps-svg steps.svg
)";

constexpr double kAutoOpSeconds = 0.003;

struct RunOptions {
  std::string plan_path;
  int steps = 5;
  int warmup = 1;
  std::optional<double> time_scale;
  double timeout = 30;
  std::optional<std::string> timeline;
  std::optional<std::string> html;
  std::optional<std::string> steps_svg;
  std::optional<runtime::Fault> fault;
  std::optional<int> failed_validation;  // the step, from 0
  bool step_barrier = true;
  double check_units = 0.0;
};

StatusOr<RunOptions> ParseRunOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(app::ExpectPositional(flags, 1, "the plan file (pipeplan run PLAN)"));
  RunOptions options;
  options.plan_path = flags.positional().front();
  if (auto executor = flags.GetString("executor"); executor && *executor != "synthetic") {
    return InvalidArgument("--executor: unknown executor '" + *executor +
                           "' (this build has: synthetic)");
  }
  if (auto transport = flags.GetString("transport"); transport && *transport != "inproc") {
    return InvalidArgument("--transport: unknown transport '" + *transport +
                           "' (this build has: inproc)");
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> steps, flags.GetInt("steps", 1));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> warmup, flags.GetInt("warmup", 0));
  PIPEPLAN_ASSIGN_OR_RETURN(options.time_scale, flags.GetNonNegativeDouble("time-scale"));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> timeout,
                            flags.GetNonNegativeDouble("timeout"));
  if (options.time_scale && *options.time_scale <= 0) {
    return InvalidArgument("--time-scale must be positive");
  }
  if (timeout && *timeout <= 0) return InvalidArgument("--timeout must be positive");
  options.steps = steps.value_or(options.steps);
  options.warmup = warmup.value_or(options.warmup);
  options.timeout = timeout.value_or(options.timeout);
  options.timeline = flags.GetString("timeline");
  options.html = flags.GetString("html");
  options.steps_svg = flags.GetString("steps-svg");
  options.step_barrier = !flags.GetBool("no-step-barrier");
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> check,
                            flags.GetNonNegativeDouble("check-cost"));
  options.check_units = check.value_or(0.0);
  if (auto fault = flags.GetString("inject-fault")) {
    StatusOr<runtime::Fault> parsed = runtime::ParseFault(*fault);
    if (!parsed.ok()) return parsed.status().WithContext("--inject-fault");
    options.fault = *parsed;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> failed,
                            flags.GetInt("inject-validation-failure", 1));
  if (failed) {
    const int total = options.warmup + options.steps;
    if (*failed > total) {
      return InvalidArgument("--inject-validation-failure: step " + std::to_string(*failed) +
                             " is outside the run (steps 1 to " + std::to_string(total) + ")");
    }
    options.failed_validation = *failed - 1;
  }
  return options;
}

// Seconds per unit so that the plan's mean compute action lasts kAutoOpSeconds.
double AutoTimeScale(const Plan& plan) {
  double total = 0.0;
  int count = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (!IsCompute(action.kind)) continue;
      total += plan.request.costs.ComputeTime(action);
      ++count;
    }
  }
  return count > 0 && total > 0 ? kAutoOpSeconds / (total / count) : kAutoOpSeconds;
}

std::string Milliseconds(double seconds) { return FormatFixed(seconds * 1e3, 1) + " ms"; }

// "0.0005", "2.05e-05": four significant digits, as a person would write a scale.
std::string Significant(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

StatusOr<std::vector<Timeline>> RunSteps(const Plan& plan, const RunOptions& options,
                                         double time_scale, std::vector<double>& seconds,
                                         std::vector<double>& starts) {
  runtime::LocalRunOptions run;
  run.steps = options.steps;
  run.warmup = options.warmup;
  run.timeout_seconds = options.timeout;
  run.seconds_per_unit = time_scale;
  run.step_barrier = options.step_barrier;
  const int total = options.steps + options.warmup;
  run.on_step = [&](const runtime::StepReport& report) {
    std::cerr << "step " << report.step + 1 << "/" << total << (report.warmup ? " (warm-up)" : "")
              << ": " << Milliseconds(report.seconds)
              << (report.step == options.failed_validation ? " (validation failed: replayed)" : "")
              << "\n";
    seconds.push_back(report.seconds);
    if (!report.warmup) starts.push_back(report.start);
  };
  const runtime::SyntheticOptions synthetic{
      .seconds_per_unit = time_scale,
      .fail_validation_at = options.failed_validation.value_or(-1),
      .check_units = options.check_units};
  return runtime::RunSyntheticInProcess(plan, synthetic, run, options.fault);
}

// "step 3 (failed validation): 14.2 ms; the other steps: median 12.0 ms".
void PrintFailedValidation(int step, const std::vector<double>& seconds) {
  if (step < 0 || step >= static_cast<int>(seconds.size())) return;
  std::vector<double> others;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (static_cast<int>(i) != step) others.push_back(seconds[i]);
  }
  std::cout << "step " << step + 1 << " (failed validation, forwards before each PV replayed): "
            << Milliseconds(seconds[step]);
  if (!others.empty()) {
    std::sort(others.begin(), others.end());
    std::cout << "; the other steps: median " << Milliseconds(others[others.size() / 2]);
  }
  std::cout << "\n";
}

Status ExecuteRun(const RunOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const Plan plan, app::ReadPlanFile(options.plan_path));
  PIPEPLAN_RETURN_IF_ERROR(
      app::CheckOutputPaths({options.timeline, options.html, options.steps_svg}));
  if (options.fault) {
    PIPEPLAN_RETURN_IF_ERROR(
        runtime::CheckFault(plan, *options.fault, options.warmup + options.steps)
            .WithContext("--inject-fault"));
    if (options.fault->kind == runtime::FaultKind::kCrash) {
      return InvalidArgument(
          "--inject-fault: a crash needs one process per rank (pipeplan-torch run "
          "--local-ranks P); here every rank is a thread of this process");
    }
  }
  if (options.failed_validation && !HasPostValidation(plan)) {
    return InvalidArgument(
        "--inject-validation-failure: the plan has no post-validation (plan a zero-bubble "
        "strategy with --post-validation)");
  }
  const double time_scale = options.time_scale.value_or(AutoTimeScale(plan));
  const Topology& t = plan.request.topology;
  std::cout << options.plan_path << ": "
            << (plan.provenance.strategy.empty() ? plan.request.strategy : plan.provenance.strategy)
            << ", P=" << t.ranks << " V=" << t.stages_per_rank << " M=" << t.microbatches
            << "; executor synthetic, transport inproc\n"
            << "time scale: " << Significant(time_scale) << " s per unit"
            << (options.time_scale ? "" : " (auto: the mean compute action lasts 3 ms)") << "\n"
            << std::flush;

  std::vector<double> seconds;  // every step's wall time, warm-up included
  std::vector<double> starts;   // every measured step's time zero on the run's clock
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<Timeline> steps,
                            RunSteps(plan, options, time_scale, seconds, starts));
  PIPEPLAN_ASSIGN_OR_RETURN(const Timeline simulated, Simulate(plan));
  // A failed validation is what the user asked to see: its step, when it was measured.
  const bool show_failed =
      options.failed_validation && *options.failed_validation >= options.warmup;
  const Timeline& measured =
      show_failed ? steps[static_cast<size_t>(*options.failed_validation - options.warmup)]
                  : MedianStep(steps);
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineDiff diff, DiffTimelines(plan, simulated, measured));

  std::vector<app::OutputFile> files;  // rendered before anything is written
  if (options.timeline) {
    PIPEPLAN_ASSIGN_OR_RETURN(std::string content,
                              SerializeTimelineFile({measured, plan, time_scale},
                                                    DetectProtoFormat(*options.timeline, "")));
    files.push_back({*options.timeline, std::move(content)});
  }
  if (options.html) {
    files.push_back(
        {*options.html,
         RenderDiffHtml(
             plan, simulated, measured, diff, {},
             options.plan_path +
                 (show_failed
                      ? ", step " + std::to_string(*options.failed_validation + 1) +
                            " (its validation failed)"
                      : ", median of " + std::to_string(options.steps) + " measured steps"))});
  }
  if (options.steps_svg) {
    std::vector<double> offsets(starts.size());  // the steps' starts in the timelines' unit
    std::transform(starts.begin(), starts.end(), offsets.begin(),
                   [&](double start) { return start / time_scale; });
    PIPEPLAN_ASSIGN_OR_RETURN(std::string svg,
                              RenderMeasuredStepsSvg(plan, steps, offsets,
                                                     {.name = options.plan_path,
                                                      .first_step = options.warmup + 1,
                                                      .step_barrier = options.step_barrier}));
    files.push_back({*options.steps_svg, std::move(svg)});
  }
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files, /*create_parents=*/true));

  std::cout << "steps: " << options.warmup << " warm-up + " << options.steps
            << " measured; median step "
            << Milliseconds(MedianStep(steps).metrics.makespan * time_scale);
  if (!options.step_barrier) {
    // Without the barrier steps overlap: what one adds to the run is the figure to compare.
    std::vector<double> added(seconds.begin() + options.warmup, seconds.end());
    std::sort(added.begin(), added.end());
    std::cout << " from its earliest rank's start; no step barrier: each adds a median "
              << Milliseconds(added[added.size() / 2]) << " to the run";
  }
  std::cout << "\n";
  if (options.failed_validation) PrintFailedValidation(*options.failed_validation, seconds);
  if (show_failed) {
    std::cout << "the table below, --timeline and --html show step "
              << *options.failed_validation + 1
              << " (its discarded first runs hatched in the report)\n";
  }
  std::cout << "\n" << RenderDiffText(plan, diff, {});
  for (const app::OutputFile& file : files) std::cout << "wrote " << file.path << "\n";
  return Status::Ok();
}

}  // namespace

int RunRunCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<RunOptions> kSpec = {"run",
                                                     kHelp,
                                                     {{"executor"},
                                                      {"transport"},
                                                      {"steps"},
                                                      {"warmup"},
                                                      {"time-scale"},
                                                      {"timeout"},
                                                      {"timeline"},
                                                      {"html"},
                                                      {"steps-svg"},
                                                      {"no-step-barrier", app::FlagKind::kBool},
                                                      {"check-cost"},
                                                      {"inject-fault"},
                                                      {"inject-validation-failure"}},
                                                     ParseRunOptions,
                                                     ExecuteRun};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
