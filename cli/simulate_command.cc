// pipeplan simulate: predict when every action of a plan runs and print the step metrics;
// optionally write a Chrome trace, an SVG timeline and an HTML report.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/metrics_json.h"
#include "pipeplan/app/plan_summary.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/cli/torch_steps.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/reports/chrome_trace.h"
#include "pipeplan/reports/html_report.h"
#include "pipeplan/reports/svg_timeline.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan simulate PLAN [--costs FILE] [--runtime NAME] [--export FORMAT] [--json]
                          [--trace FILE] [--svg FILE] [--html FILE] [--timeline FILE]

Validates a plan file (binary, text or JSON protobuf, as written by 'pipeplan plan' or
'pipeplan import') and simulates it with the costs and memory model stored in the plan,
or with the costs of --costs FILE.
Times are in the plan's time unit; memory in its memory unit.

Metrics (docs/planning.md, section 4):
  makespan              end of the last action on any rank
  zb_bubble_rate        (span - work) / span of the rank with the longest span, where span =
                        last compute end - first compute start (the Zero Bubble papers' figure)
  bubble_fraction       1 - busy_r / makespan, the max and the mean over ranks
  lower_bound           max(per-rank work, critical path of one microbatch); gap = makespan /
                        lower_bound - 1
A plan built with --post-validation adds the line "post-validation: PV on every rank,
N receives tagged rollback" (receives a failed validation must still drain).

Options:
  --costs FILE          simulate the same actions with these costs instead of the plan's
                        (e.g. from 'pipeplan calibrate': with --timeline, the simulated
                        side of a 'pipeplan diff' against a measured run of this plan)
  --runtime NAME        whose runtime runs it: pipeplan-torch (default: pipeplan's runtime,
                        transfers in the background), or torch / torchtitan: torch's
                        _PipelineScheduleRuntime on NCCL, each SEND and RECV its own batch on
                        the rank's one comm stream, in list order (docs/torch-interop.md);
                        prints the step for each export beside pipeplan's runtime, and which
                        export to load
  --export FORMAT       with --runtime torch: the list torch runs, torch-csv-comms (default:
                        the plan's transfers) or torch-csv (compute only: torch adds its own
                        transfers, as its multi-stage schedule classes do); the metrics,
                        --json and the files are of that run
  --json                print one JSON object instead of the table: strategy, ranks,
                        stages_per_rank, microbatches, makespan, zb_bubble_rate,
                        bubble_fraction_max, bubble_fraction_mean, lower_bound,
                        gap_to_lower_bound, post_validation (true/false),
                        rollback_receives, and per-rank arrays busy, idle,
                        peak_activation_memory, peak_memory; with --runtime torch also
                        runtime, export, makespan_torch_csv_comms, makespan_torch_csv (null
                        where torch cannot run it), makespan_pipeplan_runtime
  --trace FILE          write a Chrome trace (open in https://ui.perfetto.dev or
                        chrome://tracing)
  --svg FILE            write an SVG timeline (one row per rank)
  --html FILE           write a self-contained HTML report (metrics and timeline)
  --timeline FILE       write the simulated timeline with its plan (binary, text or JSON
                        protobuf by extension), to compare with a measured one in
                        'pipeplan diff'
  -h, --help            show this help

Examples:
  pipeplan simulate plan.pb
  pipeplan simulate plan.pb --json
  pipeplan simulate plan.pb --trace trace.json --svg timeline.svg --html report.html
  pipeplan simulate plan.pb --costs calibrated.json --timeline simulated.pb
  pipeplan simulate plan.pb --runtime torch --export torch-csv --svg torch.svg
)";

struct SimulateOptions {
  std::string plan_path;
  std::optional<std::string> costs;
  bool json = false;
  std::optional<std::string> trace;
  std::optional<std::string> svg;
  std::optional<std::string> html;
  std::optional<std::string> timeline;
  std::optional<TorchLists> torch;  // --runtime torch|torchtitan, --export: the list it runs
};

StatusOr<SimulateOptions> ParseSimulateOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(
      app::ExpectPositional(flags, 1, "the plan file (pipeplan simulate PLAN)"));
  SimulateOptions options;
  options.plan_path = flags.positional().front();
  options.costs = flags.GetString("costs");
  options.json = flags.GetBool("json");
  options.trace = flags.GetString("trace");
  options.svg = flags.GetString("svg");
  options.html = flags.GetString("html");
  options.timeline = flags.GetString("timeline");
  PIPEPLAN_ASSIGN_OR_RETURN(options.torch,
                            ParseTorchRun(flags.GetString("runtime"), flags.GetString("export")));
  return options;
}

std::string RenderText(const std::string& path, const Plan& plan, const Timeline& timeline) {
  const Metrics& m = timeline.metrics;
  const Topology& t = plan.request.topology;
  std::string out = path + ": " + app::PlanStrategyName(plan) + ", P=" + std::to_string(t.ranks) +
                    " V=" + std::to_string(t.stages_per_rank) +
                    " M=" + std::to_string(t.microbatches) + "\n";
  if (!plan.provenance.solver_status.empty()) {
    out += "solver: " + plan.provenance.solver_status + "\n";
  }
  out += "\n";
  app::TextTable metrics({"metric", "value"}, {true, false});
  metrics.AddRow({"makespan", app::FormatCompact(m.makespan)});
  metrics.AddRow({"lower bound", app::FormatCompact(m.lower_bound)});
  metrics.AddRow({"gap to lower bound", app::FormatPercent(m.gap_to_lower_bound)});
  metrics.AddRow({"zb_bubble_rate", FormatFixed(m.zb_bubble_rate, 4)});
  metrics.AddRow({"bubble fraction max", FormatFixed(m.bubble_fraction_max, 4)});
  metrics.AddRow({"bubble fraction mean", FormatFixed(m.bubble_fraction_mean, 4)});
  out += metrics.Render() + "\n";
  if (const std::string pv = app::PostValidationLine(plan); !pv.empty()) out += pv + "\n\n";
  app::TextTable ranks({"rank", "busy", "idle", "peak activation memory", "peak memory"});
  for (const RankTimeline& rank : timeline.ranks) {
    ranks.AddRow({std::to_string(rank.rank.value), app::FormatCompact(rank.busy),
                  app::FormatCompact(std::max(0.0, m.makespan - rank.busy)),
                  app::FormatMemory(rank.peak_activation_memory, plan.request.memory),
                  app::FormatMemory(rank.peak_memory, plan.request.memory)});
  }
  out += ranks.Render();
  return out;
}

// Each export's step on torch's runtime beside pipeplan's runtime, and which export to load.
std::string RenderTorchExports(const Plan& plan, const TorchSteps& steps,
                               const Timeline& pipeplan_timeline) {
  const double own = pipeplan_timeline.metrics.makespan;
  app::TextTable table({"runs", "makespan", "vs pipeplan's runtime"}, {true, false, false});
  const auto add = [&](const std::string& name, const TorchStep& step) {
    if (!step.run.has_value()) {
      table.AddSpanRow({name}, "cannot run: " + step.error);
      return;
    }
    const double change = own > 0 ? step.run->timeline.metrics.makespan / own - 1 : 0.0;
    const std::string sign = change < 0 ? "-" : "+";
    table.AddRow({name, step.Cell(), own > 0 ? sign + app::FormatPercent(std::abs(change)) : "-"});
  };
  add("torch, torch-csv-comms", steps.plan_transfers);
  add("torch, torch-csv", steps.torch_lowering);
  table.AddRow({"pipeplan's runtime", app::FormatCompact(own), ""});
  std::string out = "\n" + table.Render();
  if (const std::string advice = AdviseTorchExport(steps); !advice.empty()) {
    out += advice + "\n";
  }
  const bool slower = steps.plan_transfers.run.has_value() &&
                      steps.plan_transfers.run->timeline.metrics.makespan > own * (1 + 1e-9);
  if (slower && !IsTorchScheduleRuntime(plan.request.runtime)) {
    out +=
        "note: this plan posts each receive right before its consumer, where torch's runtime "
        "cannot start it until the compute ahead of it ends; planned with --runtime torch, its "
        "receives are posted when their data is sent\n";
  }
  return out;
}

// The fields --json adds with --runtime torch: the export shown, each export's makespan (null
// where torch cannot run it) and pipeplan's runtime's.
std::string TorchExportsJson(const TorchSteps& steps, const Timeline& pipeplan_timeline,
                             TorchLists lists) {
  const auto makespan = [](const TorchStep& step) {
    return step.run.has_value() ? app::JsonNumber(step.run->timeline.metrics.makespan)
                                : std::string("null");
  };
  return ",\"runtime\":\"torch\",\"export\":" + app::JsonString(ExportName(lists)) +
         ",\"makespan_torch_csv_comms\":" + makespan(steps.plan_transfers) +
         ",\"makespan_torch_csv\":" + makespan(steps.torch_lowering) +
         ",\"makespan_pipeplan_runtime\":" + app::JsonNumber(pipeplan_timeline.metrics.makespan);
}

Status ExecuteSimulate(const SimulateOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(Plan plan, app::LoadPlanFile(options.plan_path));
  if (options.costs.has_value()) {
    // The plan written with the timeline carries the costs it was simulated with.
    app::CostFlags cost_file;
    cost_file.costs_file = options.costs;
    cost_file.any_given = true;
    PIPEPLAN_ASSIGN_OR_RETURN(CostModel costs, app::LoadCosts(cost_file));
    StatusOr<std::vector<std::string>> notes = RecostPlan(plan, std::move(costs));
    if (!notes.ok()) return notes.status().WithContext(*options.costs);
    for (const std::string& note : *notes) app::PrintNote(note);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, Simulate(plan));
  std::string torch_text;
  std::string torch_json;
  if (options.torch.has_value()) {
    const TorchSteps steps = SimulateTorchExports(plan);
    torch_text = RenderTorchExports(plan, steps, timeline);
    torch_json = TorchExportsJson(steps, timeline, *options.torch);
    PIPEPLAN_ASSIGN_OR_RETURN(TorchRuntimeRun run, steps.Chosen(*options.torch));
    plan = std::move(run.plan);
    timeline = std::move(run.timeline);
  }

  // Render everything first so that a failure leaves no output behind.
  std::vector<app::OutputFile> files;
  const std::string name = app::PlanStrategyName(plan);
  if (options.trace.has_value())
    files.push_back({*options.trace, ExportChromeTrace(plan, timeline)});
  if (options.svg.has_value()) {
    SvgOptions svg;
    svg.title = name;
    files.push_back({*options.svg, RenderSvgTimeline(plan, timeline, svg)});
  }
  if (options.html.has_value()) {
    ReportOptions report;
    report.subtitle = name + ", " + options.plan_path;
    if (const std::string pv = app::PostValidationLine(plan); !pv.empty())
      report.subtitle += "; " + pv;
    files.push_back({*options.html, RenderHtmlReport({ReportEntry{name, plan, timeline}}, report)});
  }
  if (options.timeline.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::string content,
        SerializeTimelineFile({timeline, plan}, DetectProtoFormat(*options.timeline, "")));
    files.push_back({*options.timeline, std::move(content)});
  }
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files, /*create_parents=*/true));

  if (options.json) {
    std::string json = app::RenderMetricsJson(plan, timeline);
    if (!torch_json.empty()) json = json.substr(0, json.rfind('}')) + torch_json + "}\n";
    std::cout << json;
  } else {
    if (options.torch.has_value()) {
      std::cout << "on torch's runtime as modelled (NCCL, one comm stream per rank: "
                   "docs/torch-interop.md), loaded from "
                << ExportName(*options.torch) << "\n";
    }
    std::cout << RenderText(options.plan_path, plan, timeline) << torch_text;
    for (const app::OutputFile& file : files) std::cout << "wrote " << file.path << "\n";
  }
  return Status::Ok();
}

}  // namespace

int RunSimulateCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<SimulateOptions> kSpec = {"simulate",
                                                          kHelp,
                                                          {{"costs"},
                                                           {"runtime"},
                                                           {"export"},
                                                           {"json", app::FlagKind::kBool},
                                                           {"trace"},
                                                           {"svg"},
                                                           {"html"},
                                                           {"timeline"}},
                                                          ParseSimulateOptions,
                                                          ExecuteSimulate};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
