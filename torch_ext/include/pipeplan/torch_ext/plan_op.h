// What the Python entry point (torch.ops.pipeplan.plan, torch_ext/src/torch_ops.cc) computes:
// `pipeplan plan` + `export --format torch-csv[-comms]` + `simulate --json` in process. The
// typed request goes through the same check and defaults as the command line's flags
// (app::CheckRequestValues), so the op and the CLI give the same answer for the same request,
// byte for byte. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

// One planning request, as `pipeplan plan`'s flags (nullopt: the flag is left out and its
// default applies; see docs/cli.md). Durations per stage, in the caller's time unit.
struct PlanOpRequest {
  std::string strategy{};  // a catalogue name or "auto"
  int64_t ranks = 0;
  int64_t microbatches = 0;
  std::optional<int64_t> stages_per_rank = std::nullopt;
  std::optional<int64_t> microbatch_group_size = std::nullopt;
  std::optional<double> forward = std::nullopt;
  std::optional<double> backward = std::nullopt;
  std::optional<double> backward_input = std::nullopt;
  std::optional<double> backward_weight = std::nullopt;
  std::optional<double> overlap = std::nullopt;
  std::optional<double> comm = std::nullopt;
  std::optional<double> receive_overhead = std::nullopt;
  std::optional<std::string> costs_file =
      std::nullopt;  // a CostModel file instead of the durations
  std::optional<double> memory_limit = std::nullopt;
  bool post_validation = false;
  // The plan goes to torch's runtime as a CSV: only what it runs is planned (--runtime).
  std::string runtime = "torch";
  TorchCsvFormat format = TorchCsvFormat::kComputeOnly;
};

struct PlanOpResult {
  // Per rank, the cells of its row of the torch CSV (`export --format ...`), in order.
  std::vector<std::vector<std::string>> actions;
  std::string metrics_json;  // `simulate --json`'s line, without the final newline
  // What torch's grammar cannot express and was left out; for auto, what its pick rests on.
  std::vector<std::string> notes;
};

// Errors read like the CLI's ("--ranks must be >= 1, got 0", "unknown strategy 'x' ...").
StatusOr<PlanOpResult> RunPlanOp(const PlanOpRequest& request);

// "torch-csv" or "torch-csv-comms", as `pipeplan export --format` names them.
StatusOr<TorchCsvFormat> ParseTorchCsvFormat(const std::string& name);

}  // namespace pipeplan::torch_ext
