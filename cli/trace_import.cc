#include "pipeplan/cli/trace_import.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/measurement/import_trace.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan::cli {
namespace {

StatusOr<std::vector<TraceFile>> ReadTraces(const std::vector<std::string>& paths,
                                            uint64_t max_bytes, TraceContent content) {
  std::vector<TraceFile> files;
  for (const std::string& path : paths) {
    StatusOr<std::string> json = app::ReadMaybeGzipped(path, max_bytes);
    if (!json.ok()) {
      if (json.status().code() != StatusCode::kFailedPrecondition) return json.status();
      return FailedPrecondition(json.status().message() +
                                " of JSON (a trace's limit; --max-trace-size raises it)");
    }
    StatusOr<TorchTrace> trace = ParseTorchTrace(*json, content);
    if (!trace.ok()) return trace.status().WithContext(path);
    files.push_back({path, *std::move(trace)});
  }
  return OrderByRank(std::move(files));
}

// Without --plan: the job's executed order is the plan, transfers included where torch put
// them. Its topology is read from the compute order as torch's CSV importer reads a schedule
// (same checks, same placement inference).
StatusOr<Plan> PlanOfExecutedOrder(const std::vector<TraceFile>& ranks,
                                   const TraceImportOptions& options) {
  std::string csv;
  for (const std::vector<Action>& row : ExecutedComputeOrder(ranks)) {
    for (size_t i = 0; i < row.size(); ++i) csv += (i == 0 ? "" : ",") + ToString(row[i]);
    csv += "\n";
  }
  StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(csv, TorchCsvFormat::kComputeOnly, std::nullopt);
  if (!imported.ok()) {
    return imported.status().WithContext("the executed compute order of the traces");
  }
  PlanRequest request;
  request.topology = imported->topology;
  request.strategy = options.strategy_name;
  request.runtime = Runtime::kTorch;  // it ran there: simulating it counts memory as torch does
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, app::LoadCosts(options.costs));
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<RankProgram> programs,
                            ExecutedPrograms(ranks, request.topology));
  StatusOr<Plan> plan = BuildPlanFromPrograms(request, std::move(programs));
  if (!plan.ok()) return plan.status().WithContext("the executed order of the traces");
  return plan;
}

std::string ClockName(OpClock clock) {
  return clock == OpClock::kProfilerDevice
             ? "device spans (the kernels each action launched; host ranges where it launched "
               "none)"
             : "host ranges (an action that waits for a received input from its first operator)";
}

void PrintSummary(const std::vector<TraceFile>& ranks, const TraceImport& imported,
                  const TraceImportOptions& options) {
  std::cout << "imported " << ranks.size() << " trace" << (ranks.size() == 1 ? "" : "s")
            << ", timed by " << ClockName(imported.clock) << "\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::cout << "  rank " << r << ": " << ranks[r].name << "\n";
  }
  const ImportedStep& chosen = imported.steps[imported.chosen];
  app::TextTable table({"step", "makespan", "peak memory", ""}, {true, false, false, true});
  for (size_t s = 0; s < imported.steps.size(); ++s) {
    const ImportedStep& step = imported.steps[s];
    bool bytes = false;
    for (const RankTimeline& rank : step.timeline.ranks) {
      bytes = bytes || rank.memory_unit == MemoryUnit::kBytes;
    }
    table.AddRow({std::to_string(step.number),
                  app::FormatFixed(step.timeline.metrics.makespan / 1e3, 3) + " ms",
                  bytes ? app::FormatBytes(PeakMemory(step.timeline)) : "-",
                  s == imported.chosen ? "written" : ""});
  }
  std::cout << table.Render();
  std::cout << "clock alignment (step " << chosen.number << "):";
  for (size_t r = 0; r < chosen.clock_shifts.size(); ++r) {
    std::cout << (r == 0 ? " " : ", ") << "rank " << r << " +"
              << app::FormatFixed(chosen.clock_shifts[r], 1) << " us";
  }
  std::cout << "\nwrote " << *options.output << "\n";
  if (options.plan_output.has_value()) {
    std::cout << "wrote the plan to " << *options.plan_output << "\n";
  }
  if (options.profile_output.has_value()) {
    std::cout << "wrote a profile of all " << imported.steps.size() << " steps to "
              << *options.profile_output << " (for 'pipeplan calibrate')\n";
  }
}

// Every imported step, not only the one written: the spread of each figure across them is
// what tells a quiet measurement from a noisy one.
StatusOr<Profile> ProfileOfEveryStep(const Plan& plan, const TraceImport& imported,
                                     const TraceImportOptions& options) {
  std::vector<Timeline> steps;
  ProfileOptions profile_options;
  profile_options.seconds_per_unit = kTraceSecondsPerUnit;
  profile_options.source = "measured";
  for (const ImportedStep& step : imported.steps) {
    steps.push_back(step.timeline);
    profile_options.step_names.push_back("step " + std::to_string(step.number) + " of " +
                                         options.traces.front() + "...");
  }
  return BuildProfile(plan, steps, profile_options);
}

void PrintLayerSummary(const LayerTraceImport& imported, const std::string& output) {
  const bool memory = imported.costs.HasMemory();
  std::vector<std::string> head = {"layer", "forward", "backward", "ranges F/B"};
  if (memory) head.insert(head.end(), {"activation", "parameters", "output"});
  app::TextTable table(head, {true, false, false, false, false, false, false});
  for (size_t i = 0; i < imported.costs.layers.size(); ++i) {
    const LayerFigures& layer = imported.costs.layers[i];
    std::vector<std::string> row = {layer.name,
                                    app::FormatFixed(layer.forward.value_or(0) / 1e3, 3) + " ms",
                                    app::FormatFixed(layer.backward.value_or(0) / 1e3, 3) + " ms",
                                    std::to_string(imported.counts[i].forwards) + "/" +
                                        std::to_string(imported.counts[i].backwards)};
    if (memory) {
      row.insert(row.end(),
                 {app::FormatBytes(layer.activation), app::FormatBytes(layer.parameter_bytes),
                  app::FormatBytes(layer.output_bytes)});
    }
    table.AddRow(row);
  }
  std::cout << table.Render() << "wrote " << output << " (for 'pipeplan partition --layers')\n";
}

}  // namespace

StatusOr<LayerTraceImport> ImportLayerTraces(const TraceImportOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(
      const std::vector<TraceFile> ranks,
      ReadTraces(options.traces, options.max_trace_bytes, TraceContent::kLayers));
  return LayerCostsOfTraces(ranks);
}

Status ExecuteLayerTraceImport(const TraceImportOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const LayerTraceImport imported, ImportLayerTraces(options));
  for (const std::string& note : imported.notes) app::PrintNote(note);
  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, SerializeLayerCosts(imported.costs, format));
  PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(options.output, data));
  if (!to_stdout) PrintLayerSummary(imported, *options.output);
  return Status::Ok();
}

StatusOr<ImportedTraces> ImportTraces(const TraceImportOptions& options, std::optional<Plan> plan) {
  ImportedTraces out;
  PIPEPLAN_ASSIGN_OR_RETURN(
      out.ranks, ReadTraces(options.traces, options.max_trace_bytes, TraceContent::kActions));
  if (plan.has_value()) {
    out.plan = *std::move(plan);
  } else {
    PIPEPLAN_ASSIGN_OR_RETURN(out.plan, PlanOfExecutedOrder(out.ranks, options));
    out.notes.emplace_back(
        "no --plan: the plan is the order the traces' job ran, torch's transfers where torch "
        "put them");
  }
  PIPEPLAN_ASSIGN_OR_RETURN(out.imported, ImportTorchTraces(out.plan, out.ranks, options.step));
  out.notes.insert(out.notes.end(), out.imported.notes.begin(), out.imported.notes.end());
  return out;
}

Status ExecuteTraceImport(const TraceImportOptions& options) {
  std::optional<Plan> given;
  if (options.plan.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(given, app::LoadPlanFile(*options.plan));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const ImportedTraces traces, ImportTraces(options, std::move(given)));
  for (const std::string& note : traces.notes) app::PrintNote(note);
  const Plan& plan = traces.plan;
  const TraceImport& imported = traces.imported;
  const std::vector<TraceFile>& ranks = traces.ranks;

  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(
      const std::string data,
      SerializeTimelineFile({imported.steps[imported.chosen].timeline, plan, kTraceSecondsPerUnit},
                            format));
  std::vector<app::OutputFile> files;
  if (options.plan_output.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string plan_data,
                              SerializePlan(plan, DetectProtoFormat(*options.plan_output, "")));
    files.push_back({*options.plan_output, plan_data});
  }
  if (options.profile_output.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const Profile profile, ProfileOfEveryStep(plan, imported, options));
    PIPEPLAN_ASSIGN_OR_RETURN(
        const std::string profile_data,
        SerializeProfile(profile, DetectProtoFormat(*options.profile_output, "")));
    files.push_back({*options.profile_output, profile_data});
  }
  if (!to_stdout) files.push_back({*options.output, data});
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files));
  if (to_stdout) PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(std::nullopt, data));
  if (!to_stdout) PrintSummary(ranks, imported, options);
  return Status::Ok();
}

}  // namespace pipeplan::cli
