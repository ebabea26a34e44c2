#include "pipeplan/cli/torch_steps.h"

#include <utility>

#include "pipeplan/app/format.h"

namespace pipeplan::cli {
namespace {

TorchStep Run(const Plan& plan, TorchLists lists) {
  StatusOr<TorchRuntimeRun> run =
      SimulateOnTorchRuntime(plan, lists, plan.request.costs, plan.request.memory);
  if (!run.ok()) return {std::nullopt, run.status().message()};
  return {std::move(run).value(), ""};
}

double Makespan(const TorchStep& step) { return step.run->timeline.metrics.makespan; }

}  // namespace

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
    return "load the torch-csv-comms export: its step is " + app::FormatPercent(1 - a / b) +
           " shorter than with the transfers torch adds itself (torch-csv, as torch's "
           "multi-stage schedule classes run their orders)";
  }
  if (b < a * (1 - 1e-9)) {
    return "load the torch-csv export: the transfers torch adds itself give a " +
           app::FormatPercent(1 - b / a) + " shorter step than pipeplan's (torch-csv-comms)";
  }
  return "either export: torch-csv and torch-csv-comms give the same step on torch's runtime";
}

}  // namespace pipeplan::cli
