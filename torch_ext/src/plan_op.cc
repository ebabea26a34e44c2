#include "pipeplan/torch_ext/plan_op.h"

#include <string_view>
#include <utility>

#include "flags.h"
#include "metrics_json.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/text_format.h"
#include "request_flags.h"

namespace pipeplan::torch_ext {
namespace {

// `pipeplan plan`'s request flags (its --request and --output do not apply here).
std::vector<cli::FlagSpec> RequestFlagSpecs() {
  std::vector<cli::FlagSpec> specs = {{"strategy"}};
  for (const cli::FlagSpec& spec : cli::TopologyFlagSpecs()) specs.push_back(spec);
  for (const cli::FlagSpec& spec : cli::CostFlagSpecs()) specs.push_back(spec);
  return specs;
}

void AddNumber(std::string_view flag, const std::optional<double>& value,
               std::vector<std::string>* args) {
  if (!value.has_value()) return;
  args->emplace_back(flag);
  args->push_back(FormatNumber(*value));
}

void AddInteger(std::string_view flag, const std::optional<int64_t>& value,
                std::vector<std::string>* args) {
  if (!value.has_value()) return;
  args->emplace_back(flag);
  args->push_back(std::to_string(*value));
}

// The cells of each "\r\n"-ended row; our tokens never hold ',' (torch_csv_export.cc).
std::vector<std::vector<std::string>> SplitRows(std::string_view csv) {
  std::vector<std::vector<std::string>> rows;
  constexpr std::string_view kRowEnd = "\r\n";
  while (!csv.empty()) {
    const size_t end = csv.find(kRowEnd);
    std::string_view row = csv.substr(0, end);
    std::vector<std::string>& cells = rows.emplace_back();
    while (!row.empty()) {
      const size_t comma = row.find(',');
      cells.emplace_back(row.substr(0, comma));
      row.remove_prefix(comma == std::string_view::npos ? row.size() : comma + 1);
    }
    csv.remove_prefix(end == std::string_view::npos ? csv.size() : end + kRowEnd.size());
  }
  return rows;
}

}  // namespace

std::vector<std::string> PlanArgs(const PlanOpRequest& request) {
  std::vector<std::string> args = {"--strategy", request.strategy};
  AddInteger("--ranks", request.ranks, &args);
  AddInteger("--microbatches", request.microbatches, &args);
  AddInteger("--stages-per-rank", request.stages_per_rank, &args);
  AddInteger("--microbatch-group-size", request.microbatch_group_size, &args);
  AddNumber("--forward", request.forward, &args);
  AddNumber("--backward", request.backward, &args);
  AddNumber("--backward-input", request.backward_input, &args);
  AddNumber("--backward-weight", request.backward_weight, &args);
  AddNumber("--overlap", request.overlap, &args);
  AddNumber("--comm", request.comm, &args);
  AddNumber("--receive-overhead", request.receive_overhead, &args);
  if (request.costs_file.has_value()) args.insert(args.end(), {"--costs", *request.costs_file});
  AddNumber("--memory-limit", request.memory_limit, &args);
  if (request.post_validation) args.emplace_back("--post-validation");
  return args;
}

StatusOr<PlanOpResult> RunPlanOp(const PlanOpRequest& request) {
  PIPEPLAN_ASSIGN_OR_RETURN(const cli::Flags flags,
                            cli::Flags::Parse(PlanArgs(request), RequestFlagSpecs()));
  PIPEPLAN_ASSIGN_OR_RETURN(const cli::RequestFlags request_flags,
                            cli::ParseRequestFlags(flags, cli::StrategyFlag::kRequired));
  PIPEPLAN_ASSIGN_OR_RETURN(const PlanRequest plan_request, cli::LoadRequest(request_flags));
  PIPEPLAN_ASSIGN_OR_RETURN(const SimulatedPlan planned, BuildAndSimulatePlan(plan_request));
  const Plan& plan = planned.plan;
  const Timeline& timeline = planned.timeline;

  TorchCsvExport exported = ExportTorchCsv(plan, request.format);
  PlanOpResult result;
  result.actions = SplitRows(exported.csv);
  result.metrics_json = cli::RenderMetricsJson(plan, timeline);
  if (result.metrics_json.ends_with('\n')) result.metrics_json.pop_back();
  result.notes = std::move(exported.notes);
  return result;
}

StatusOr<TorchCsvFormat> ParseTorchCsvFormat(const std::string& name) {
  if (name == "torch-csv") return TorchCsvFormat::kComputeOnly;
  if (name == "torch-csv-comms") return TorchCsvFormat::kComputeComms;
  return InvalidArgument("unknown format '" + name + "' (expected torch-csv or torch-csv-comms)");
}

}  // namespace pipeplan::torch_ext
