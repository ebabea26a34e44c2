// Running one training step of a plan and comparing its loss and gradients with a
// non-pipelined reference: in-process (ranks as threads) or over Gloo (pipeplan-torch
// spawning one process per rank).
#pragma once

#include <ATen/core/Tensor.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/torch_ext/stage_module.h"
#include "pipeplan/torch_ext/torch_executor.h"

namespace pipeplan::torch_ext::testing {

// What one step produced: loss and per-stage gradients, by parameter name.
struct StepResult {
  double loss = std::nan("");
  std::map<int, std::map<std::string, at::Tensor>> grads;
};

// One step of `stages` in sequence with stock autograd, every microbatch through all stages.
StepResult Reference(const std::vector<const StageModule*>& stages, const ModelConfig& config,
                     int microbatches);

// `by_depth` (a reference over the model's stages) as every stage of `map` should have it:
// under dual placement both copies of a model stage hold the whole batch's gradient.
StepResult OnEveryStage(const StageMap& map, const StepResult& by_depth);

// One step of `plan` with every rank a thread of this process.
StepResult RunInProcess(const Plan& plan, const TorchExecutorOptions& options);

// One step of `plan` with every rank a process (pipeplan-torch run --local-ranks), with
// `flags` added to its command line.
StepResult RunOverGloo(const Plan& plan, const std::vector<std::string>& flags,
                       const std::string& name);

// pipeplan-torch's flags for `config`.
std::vector<std::string> ModelFlags(const ModelConfig& config);

// Loss and every gradient equal (fp32: rtol 1e-5 unless told, atol 1e-8); failures name
// stage and parameter.
void ExpectMatches(const StepResult& got, const StepResult& want, double rtol = 1e-5);

}  // namespace pipeplan::torch_ext::testing
