#include "pipeplan/cli/torch_steps.h"

#include <utility>

#include "pipeplan/app/format.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/model/runtime_target.h"

namespace pipeplan::cli {
namespace {

TorchStep Run(const Plan& plan, TorchLists lists) {
  StatusOr<TorchRuntimeRun> run =
      SimulateOnTorchRuntime(plan, lists, plan.request.costs, plan.request.memory);
  if (!run.ok()) return {std::nullopt, run.status().message()};
  return {std::move(run).value(), ""};
}

Status ExportError(TorchLists lists, const std::string& error) {
  return InvalidArgument("--export " + ExportName(lists) + ": " + error);
}

double Makespan(const TorchStep& step) { return step.run->timeline.metrics.makespan; }

}  // namespace

std::string ExportName(TorchLists lists) {
  return lists == TorchLists::kTorchLowering ? "torch-csv" : "torch-csv-comms";
}

StatusOr<TorchRuntimeRun> TorchSteps::Chosen(TorchLists lists) const {
  const TorchStep& step = lists == TorchLists::kTorchLowering ? torch_lowering : plan_transfers;
  if (!step.run.has_value()) return ExportError(lists, step.error);
  return *step.run;
}

StatusOr<TorchRuntimeRun> SimulateTorchExport(const Plan& plan, TorchLists lists) {
  TorchStep step = Run(plan, lists);
  if (!step.run.has_value()) return ExportError(lists, step.error);
  return *std::move(step.run);
}

StatusOr<std::optional<TorchLists>> ParseTorchRun(const std::optional<std::string>& runtime,
                                                  const std::optional<std::string>& format) {
  bool torch = false;
  if (runtime.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const Runtime named, app::ParseRuntimeFlag(*runtime));
    if (named == Runtime::kMegatron) {
      return InvalidArgument(
          "--runtime megatron: there is no model of Megatron-LM's runtime; simulate without "
          "--runtime (pipeplan's) or with --runtime torch");
    }
    torch = IsTorchScheduleRuntime(named);
  }
  if (!format.has_value()) {
    return torch ? std::optional<TorchLists>(TorchLists::kPlanTransfers) : std::nullopt;
  }
  if (!torch) {
    return InvalidArgument(
        "--export: only with --runtime torch (it names the list torch's runtime runs)");
  }
  if (*format == "torch-csv") return std::optional<TorchLists>(TorchLists::kTorchLowering);
  if (*format == "torch-csv-comms") return std::optional<TorchLists>(TorchLists::kPlanTransfers);
  return InvalidArgument("--export: unknown format '" + *format +
                         "' (expected torch-csv-comms or torch-csv)");
}

std::string TorchStep::Cell() const {
  return run.has_value() ? app::FormatCompact(run->timeline.metrics.makespan) : "-";
}

TorchSteps SimulateTorchExports(const Plan& plan) {
  return {Run(plan, TorchLists::kPlanTransfers), Run(plan, TorchLists::kTorchLowering)};
}

std::string AdviseTorchExport(const TorchSteps& steps) {
  const TorchStep& ours = steps.plan_transfers;
  const TorchStep& torch = steps.torch_lowering;
  if (!ours.run.has_value() && !torch.run.has_value()) return "";
  if (!torch.run.has_value()) {
    return "load the torch-csv-comms export: torch's own transfers (torch-csv) cannot run "
           "this order";
  }
  if (!ours.run.has_value()) {
    return "load the torch-csv export: pipeplan's transfers (torch-csv-comms) cannot run on "
           "torch's runtime";
  }
  const double a = Makespan(ours);
  const double b = Makespan(torch);
  if (a < b * (1 - 1e-9)) {
    return "load the torch-csv-comms export: in this model its step is " +
           app::FormatPercent(1 - a / b) +
           " shorter than with the transfers torch adds itself (torch-csv, as torch's "
           "multi-stage schedule classes run their orders)";
  }
  if (b < a * (1 - 1e-9)) {
    return "load the torch-csv export: in this model the transfers torch adds itself give a " +
           app::FormatPercent(1 - b / a) + " shorter step than pipeplan's (torch-csv-comms)";
  }
  return "either export: in this model torch-csv and torch-csv-comms give the same step";
}

}  // namespace pipeplan::cli
