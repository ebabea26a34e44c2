// A plan's step on torch's runtime (simulation/torch_runtime.h) for each way of loading it:
// the `torch-csv-comms` export (pipeplan's transfers) and the `torch-csv` export (torch adds
// its own, as its multi-stage schedule classes do). What `simulate --runtime torch` and
// `compare --runtime torch` print.
#pragma once

#include <optional>
#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/simulation/torch_runtime.h"

namespace pipeplan::cli {

struct TorchStep {
  std::optional<TorchRuntimeRun> run;  // unset where torch cannot run it (`error` says why)
  std::string error;

  // The makespan, or "-" where torch cannot run it.
  std::string Cell() const;
};

struct TorchSteps {
  TorchStep plan_transfers;  // torch-csv-comms
  TorchStep torch_lowering;  // torch-csv
  // The run of `lists`, or why torch cannot run it ("--export torch-csv: ...").
  StatusOr<TorchRuntimeRun> Chosen(TorchLists lists) const;
};

// "torch-csv-comms" or "torch-csv": the export that loads `lists` into torch.
std::string ExportName(TorchLists lists);

// `--runtime` and `--export` as `simulate` takes them: the list torch's runtime runs, or nullopt
// for pipeplan's runtime (no runtime, pipeplan-torch, any). Errors name the flag: an unknown
// name, megatron (no model of its runtime), --export without torch's runtime.
StatusOr<std::optional<TorchLists>> ParseTorchRun(const std::optional<std::string>& runtime,
                                                  const std::optional<std::string>& format);

// Under the plan's own costs and memory model.
TorchSteps SimulateTorchExports(const Plan& plan);
// One export alone, as TorchSteps::Chosen gives it (where the other is not wanted).
StatusOr<TorchRuntimeRun> SimulateTorchExport(const Plan& plan, TorchLists lists);

// "load torch-csv-comms: its step is 12.3% shorter than torch's own lowering (torch-csv, as
// torch's schedule classes run) ..." — which export to load and why; empty where neither runs.
std::string AdviseTorchExport(const TorchSteps& steps);

}  // namespace pipeplan::cli
