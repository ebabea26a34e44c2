// pipeplan export: convert a plan file to PyTorch's pipelining CSV or to another protobuf
// encoding.
#include <optional>
#include <string>

#include "commands.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/torch_csv.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp = R"(usage: pipeplan export PLAN --format FORMAT [-o FILE]

Converts a plan file (binary, text or JSON protobuf) to another format. The plan is
validated first.

Options:
  --format FORMAT       required; one of:
                          torch-csv        torch.distributed.pipelining's compute-only CSV
                                           (one row per rank, tokens like 0F1, 1I0, 1W0);
                                           load it with _load_csv
                          torch-csv-comms  the same with SEND_F/RECV_F/SEND_B/RECV_B and
                                           REDUCE_GRAD, as _dump_csv writes after its comm pass
                          textproto        protobuf text format
                          json             protobuf JSON
                        What torch's grammar cannot express (e.g. post-validation) is left out
                        and reported on stderr as "note: ..." lines.
  -o, --output FILE     write here instead of standard output
  -h, --help            show this help

Examples:
  pipeplan export plan.pb --format torch-csv -o schedule.csv
  pipeplan export plan.pb --format json
)";

enum class ExportFormat : uint8_t { kTorchCsv, kTorchCsvComms, kTextproto, kJson };

struct ExportOptions {
  std::string plan_path;
  ExportFormat format = ExportFormat::kTorchCsv;
  std::optional<std::string> output;
};

StatusOr<ExportFormat> ParseExportFormat(const std::string& name) {
  if (name == "torch-csv") return ExportFormat::kTorchCsv;
  if (name == "torch-csv-comms") return ExportFormat::kTorchCsvComms;
  if (name == "textproto") return ExportFormat::kTextproto;
  if (name == "json") return ExportFormat::kJson;
  return InvalidArgument("unknown --format '" + name +
                         "' (expected torch-csv, torch-csv-comms, textproto or json)");
}

StatusOr<ExportOptions> ParseExportOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(app::ExpectPositional(flags, 1, "the plan file (pipeplan export PLAN)"));
  ExportOptions options;
  options.plan_path = flags.positional().front();
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string format, flags.RequireString("format"));
  PIPEPLAN_ASSIGN_OR_RETURN(options.format, ParseExportFormat(format));
  options.output = flags.GetString("output");
  return options;
}

StatusOr<std::string> RenderTorchCsv(const Plan& plan, TorchCsvFormat format) {
  PIPEPLAN_ASSIGN_OR_RETURN(TorchCsvExport exported, ExportTorchCsv(plan, format));
  for (const std::string& note : exported.notes) app::PrintNote(note);
  return std::move(exported.csv);
}

StatusOr<std::string> Render(const Plan& plan, ExportFormat format) {
  switch (format) {
    case ExportFormat::kTorchCsv:
      return RenderTorchCsv(plan, TorchCsvFormat::kComputeOnly);
    case ExportFormat::kTorchCsvComms:
      return RenderTorchCsv(plan, TorchCsvFormat::kComputeComms);
    case ExportFormat::kTextproto:
      return SerializePlan(plan, ProtoFormat::kText);
    case ExportFormat::kJson:
      return SerializePlan(plan, ProtoFormat::kJson);
  }
  return Internal("unhandled export format");
}

Status ExecuteExport(const ExportOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const Plan plan, app::LoadPlanFile(options.plan_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, Render(plan, options.format));
  return app::WriteOutput(options.output, data);
}

}  // namespace

int RunExportCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<ExportOptions> kSpec = {
      "export",
      kHelp,
      {{"format"}, {"output", app::FlagKind::kValue, 'o'}},
      ParseExportOptions,
      ExecuteExport};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
