// pipeplan import: read a schedule in PyTorch's pipelining CSV (compute-only, or with torch's
// transfers, which are dropped), insert comm, validate it and write it as a plan; or read
// torch.profiler traces of a torch pipelining job into a measured timeline (trace_import.h).
#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/cli/trace_import.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan import --format torch-csv|torch-csv-comms FILE [--microbatches M]
                       [--strategy-name NAME] [--costs FILE | cost flags] [-o FILE]
       pipeplan import --format torch-trace TRACE... [--plan PLAN] [--step N] [-o FILE]
                       [--plan-output FILE] [--profile-output FILE] [--max-trace-size SIZE]
       pipeplan import --format torch-layer-trace TRACE... [-o FILE] [--max-trace-size SIZE]

Reads a schedule in torch.distributed.pipelining's CSV format (one row per rank, no header,
cells like 0F1, 1I0, 1W0, 0B3, (0F1;1B0)OVERLAP_F_B), inserts SEND/RECV, validates it and
writes a plan that 'pipeplan simulate' and 'pipeplan export' accept. P is the number of
rows, V the number of stages / P; the placement (loop or V) is inferred. The import is
strict: every cell must be one whole token of the format, legacy "BW" tokens are rejected,
and errors name the row (rank) and column.

With --format torch-trace, reads torch.profiler Chrome traces (export_chrome_trace, plain or
.gz), one per rank, of a job that ran torch.distributed.pipelining's schedule runtime (which
marks every action as a "PP:<action>" range) and writes a measured timeline that 'pipeplan
diff', 'profile' and 'calibrate' read as they read 'pipeplan run --timeline'. Ranks come from
each trace's distributed info, else from the order given. Each action is timed by its GPU
span (gpu_user_annotation) where the trace has one, else by its host range from its first
operator (before that torch only waits for the action's input); a receive ends where its data
is first used. With profile_memory=True, each action's memory (allocator totals at start and
end, and the peak in between) is kept, in bytes. Every step complete on every rank is read
(ProfilerStep ranges, or the program repeating); the median one is written.

With --format torch-layer-trace, reads the traces of any job whose layers carry pipeplan's
ranges (python/pipeplan_profiler.py: profile_steps(..., layers=model), or mark_layers under
your own profiler; "pipeplan.layer.forward:<name>" and "pipeplan.layer.backward:<name>"), a
plain training loop or a pipelining job running whole backwards, and writes a layer cost file
for 'pipeplan partition --layers': per layer the median forward and backward over every
microbatch (device spans on a GPU), in us; with memory events, the bytes its forward left
allocated (activation) and its parameter and output bytes. Layers are in model order, rank by
rank. A job that splits the backward into I and W is refused (the ranges would time only I).

Options:
  --format FORMAT       required; one of:
                          torch-csv        compute actions only (what _load_csv reads and
                                           _dump_csv(format="compute_only") writes)
                          torch-csv-comms  also SEND_F/RECV_F/SEND_B/RECV_B, REDUCE_GRAD,
                                           UNSHARD and RESHARD, as torch's runtime dumps by
                                           default; these are checked and dropped (a "note:"
                                           on stderr says so) and the plan gets its own
                                           transfers
                          torch-trace      torch.profiler traces (one file per rank) to a
                                           measured timeline
                          torch-layer-trace
                                           the same traces' layer ranges to a layer cost
                                           file (per-layer F, B and bytes)
  --plan PLAN           torch-trace: the plan the job ran (e.g. the plan exported with
                        'pipeplan export --format torch-csv'); every rank's compute actions
                        must match it in order. Without it, the order the job ran becomes the
                        plan, torch's transfers where torch put them (cost flags as below)
  --plan-output FILE    torch-trace: also write the plan the traces were matched to (without
                        --plan, the plan of the order the job ran), for 'pipeplan simulate';
                        both files are written or neither
  --profile-output FILE torch-trace: also write a profile of every imported step (each
                        figure's median and spread across them), what 'pipeplan profile' makes
                        of timelines, for 'pipeplan calibrate'; all files are written or none
  --step N              torch-trace: write step N (its ProfilerStep number) instead of the
                        median step
  --max-trace-size SIZE torch-trace, torch-layer-trace: the most JSON one trace may hold,
                        once inflated (default 1GiB; e.g. 4GiB). Past it a file is refused
                        before it takes
                        memory; an import takes about 6 times its traces' JSON at its peak
  --microbatches M      microbatches per step, integer >= 1; every token must be below M
                        (default: inferred as the largest microbatch id + 1)
  --strategy-name NAME  the strategy name recorded in the plan (default: imported)
  -o, --output FILE     write the plan here; the format follows the extension: .pb or .bin
                        binary, .json JSON, anything else text format
                        (default: text format on standard output)
  -h, --help            show this help

Costs stored in the plan (for 'pipeplan simulate'; durations per stage, numbers >= 0;
default F=1, B=2, I=W=1, no comm latency):
  --forward T, --backward T, --backward-input T, --backward-weight T, --overlap T,
  --comm T, --receive-overhead T
                        as for 'pipeplan plan' (B defaults to I + W; with only B given,
                        I = W = B/2; an OVERLAP_F_B cell costs --overlap, default F + B)
  --costs FILE          a CostModel file (text, JSON or binary protobuf) instead

Examples:
  pipeplan import --format torch-csv schedule.csv -o imported.pb
  pipeplan import --format torch-csv-comms torch_dump.csv -o imported.pb
  pipeplan import --format torch-csv schedule.csv --microbatches 8 --forward 1 --backward 2
  pipeplan import --format torch-trace traces/rank*.json.gz --plan plan.pb -o measured.pb
  pipeplan import --format torch-trace traces/rank*.json.gz -o measured.pb \
      --plan-output ran.pb
  pipeplan import --format torch-layer-trace traces/rank*.json.gz -o layers.json
)";

struct ImportOptions {
  std::string csv_path;
  TorchCsvFormat format = TorchCsvFormat::kComputeOnly;
  std::optional<int> microbatches;
  std::string strategy_name = "imported";
  app::CostFlags costs;
  std::optional<std::string> output;
  std::optional<TraceImportOptions> trace;  // --format torch-trace or torch-layer-trace
  bool layers = false;                      // --format torch-layer-trace
};

std::vector<app::FlagSpec> ImportFlags() {
  std::vector<app::FlagSpec> specs = {
      {"format"},         {"microbatches"},   {"strategy-name"},
      {"plan"},           {"step"},           {"plan-output"},
      {"profile-output"}, {"max-trace-size"}, {"output", app::FlagKind::kValue, 'o'}};
  for (const app::FlagSpec& spec : app::CostFlagSpecs()) specs.push_back(spec);
  return specs;
}

StatusOr<TorchCsvFormat> ParseImportFormat(const std::string& name) {
  if (name == "torch-csv") return TorchCsvFormat::kComputeOnly;
  if (name == "torch-csv-comms") return TorchCsvFormat::kComputeComms;
  return InvalidArgument("unknown --format '" + name +
                         "' (expected torch-csv, torch-csv-comms, torch-trace or "
                         "torch-layer-trace)");
}

// What both imports take for the plan they make and where it goes.
Status ParsePlanFlags(const app::Flags& flags, std::string* strategy_name, app::CostFlags* costs,
                      std::optional<std::string>* output) {
  if (std::optional<std::string> name = flags.GetString("strategy-name"); name.has_value()) {
    if (name->empty()) return InvalidArgument("--strategy-name must not be empty");
    *strategy_name = *std::move(name);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(*costs, app::ParseCostFlags(flags));
  *output = flags.GetString("output");
  return Status::Ok();
}

// `format`: torch-trace or torch-layer-trace, as given.
StatusOr<TraceImportOptions> ParseTraceOptions(const app::Flags& flags, const std::string& format) {
  if (flags.positional().empty()) {
    return InvalidArgument("expected the trace files, one per rank (pipeplan import --format " +
                           format + " TRACE...)");
  }
  if (flags.Has("microbatches")) {
    return InvalidArgument("--microbatches is for CSV imports; a trace's plan says M");
  }
  TraceImportOptions options;
  options.traces = flags.positional();
  options.plan = flags.GetString("plan");
  options.plan_output = flags.GetString("plan-output");
  options.profile_output = flags.GetString("profile-output");
  PIPEPLAN_ASSIGN_OR_RETURN(options.step, flags.GetInt("step", 0));
  if (const std::optional<std::string> size = flags.GetString("max-trace-size")) {
    PIPEPLAN_ASSIGN_OR_RETURN(const app::MemoryAmount amount,
                              app::ParseMemoryAmount(*size, "--max-trace-size"));
    if (!amount.bytes || amount.value < 1 || amount.value > 0x1p62) {
      return InvalidArgument("--max-trace-size: expected a size with a byte unit from 1B to 4EiB " +
                             std::string("(e.g. 4GiB), got '") + *size + "'");
    }
    options.max_trace_bytes = static_cast<uint64_t>(amount.value);
  }
  PIPEPLAN_RETURN_IF_ERROR(
      ParsePlanFlags(flags, &options.strategy_name, &options.costs, &options.output));
  return options;
}

StatusOr<ImportOptions> ParseImportOptions(const app::Flags& flags) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string format, flags.RequireString("format"));
  ImportOptions options;
  if (format == "torch-trace") {
    PIPEPLAN_ASSIGN_OR_RETURN(options.trace, ParseTraceOptions(flags, format));
    return options;
  }
  if (format == "torch-layer-trace") {
    std::vector<std::string_view> not_for_layers = {"plan", "step", "plan-output", "profile-output",
                                                    "strategy-name"};
    for (const app::FlagSpec& spec : app::CostFlagSpecs()) not_for_layers.push_back(spec.name);
    for (const std::string_view name : not_for_layers) {
      if (flags.Has(std::string(name))) {
        return InvalidArgument("--" + std::string(name) +
                               " is not for --format torch-layer-trace (it writes the layers' "
                               "figures, no plan)");
      }
    }
    PIPEPLAN_ASSIGN_OR_RETURN(options.trace, ParseTraceOptions(flags, format));
    options.layers = true;
    return options;
  }
  for (const char* trace_only :
       {"plan", "step", "plan-output", "max-trace-size", "profile-output"}) {
    if (flags.Has(trace_only)) {
      return InvalidArgument("--" + std::string(trace_only) + " is for --format torch-trace");
    }
  }
  PIPEPLAN_RETURN_IF_ERROR(
      app::ExpectPositional(flags, 1, "the CSV file (pipeplan import --format torch-csv FILE)"));
  PIPEPLAN_ASSIGN_OR_RETURN(options.format, ParseImportFormat(format));
  options.csv_path = flags.positional().front();
  PIPEPLAN_ASSIGN_OR_RETURN(options.microbatches, flags.GetInt("microbatches", 1));
  PIPEPLAN_RETURN_IF_ERROR(
      ParsePlanFlags(flags, &options.strategy_name, &options.costs, &options.output));
  return options;
}

Status ExecuteImport(const ImportOptions& options) {
  if (options.layers) return ExecuteLayerTraceImport(*options.trace);
  if (options.trace.has_value()) return ExecuteTraceImport(*options.trace);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string csv, app::ReadFile(options.csv_path));
  if (const StatusOr<FileHeader> header =
          ReadFileHeader(csv, DetectProtoFormat(options.csv_path, csv));
      header.ok() && header->kind.has_value()) {
    return InvalidArgument(options.csv_path + " is a " + std::string(FileKindName(*header->kind)) +
                           " file, not a torch pipelining CSV (import reads the CSV that torch's "
                           "runtime loads or dumps)");
  }
  StatusOr<TorchCsvImport> imported = ImportTorchCsv(csv, options.format, options.microbatches);
  if (!imported.ok()) return imported.status().WithContext(options.csv_path);
  for (const std::string& note : imported->notes) app::PrintNote(note);

  PlanRequest request;
  request.topology = imported->topology;
  request.strategy = options.strategy_name;
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, app::LoadCosts(options.costs));
  StatusOr<Plan> plan = BuildPlanFromOrder(request, imported->order);
  if (!plan.ok()) return plan.status().WithContext(options.csv_path);

  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, SerializePlan(*plan, format));
  PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(options.output, data));
  if (!to_stdout) {
    const Topology& t = plan->request.topology;
    std::cout << "imported " << options.csv_path << " (P=" << t.ranks << " V=" << t.stages_per_rank
              << " M=" << t.microbatches << ") to " << *options.output << "\n";
  }
  return Status::Ok();
}

}  // namespace

int RunImportCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<ImportOptions> kSpec = {"import", kHelp, ImportFlags(),
                                                        ParseImportOptions, ExecuteImport};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
