// What each rank's optimizer step did, step by step, and its `--metrics` form: JSON Lines, one
// object per step and rank (docs/torch.md), which pandas (`read_json(lines=True)`) and jq read.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipeplan::torch_ext {

// What one step's optimizer update did (warm-up steps included): decided at EndStep, or with
// post-validation at the next step's PV.
struct StepRecord {
  int step = 0;     // from 0
  double loss = 0;  // the step's loss on the rank holding the last stage; NaN elsewhere
  std::optional<double> global_grad_norm;  // with the gradient-state exchange
  bool clipped = false;
  bool skipped = false;       // the gradients were not finite: no optimizer step
  bool rolled_back = false;   // this rank's speculative update was undone at the PV
  int replayed_forwards = 0;  // forwards of the next step run again after the verdict
};

// One line per record: {"step": N (from 1), "warmup": bool, "rank": r, "loss": x|null,
// "global_grad_norm": x|null, "clipped", "skipped", "rolled_back": bool,
// "replayed_forwards": n}. Non-finite numbers are null. `by_rank[r]` is rank r's records;
// lines go by step, then rank. Numbers print with 17 significant digits (exact).
std::string StepMetricsJsonLines(const std::vector<std::vector<StepRecord>>& by_rank, int warmup);

// One rank's records as text for another process, and back (the store's value).
std::string EncodeStepRecords(const std::vector<StepRecord>& records);
std::optional<std::vector<StepRecord>> DecodeStepRecords(const std::string& text);

}  // namespace pipeplan::torch_ext
