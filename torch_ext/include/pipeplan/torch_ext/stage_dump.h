// Per-stage dumps of 'pipeplan-torch run', in torch.save's format (LibTorch's pickle_save), so
// that torch.load reads them in Python (weights_only=True is enough: dicts, ints, floats and
// CPU tensors):
//   --dump-grads DIR   DIR/stage-S.pt: {"stage", "step", "loss", "grads": {name: tensor}},
//                      the gradients of the first step before the optimizer uses them (loss:
//                      the step's on the stage holding the last one, else NaN);
//   --dump-params DIR  DIR/step-N/stage-S.pt: {"stage", "step", "params": {name: tensor},
//                      "optimizer_state": {name: {"exp_avg": t, "exp_avg_sq": t}},
//                      "optimizer_step"} for N = 0 (the initial parameters) and after each
//                      step's optimizer update (torch.optim.AdamW's state names; SGD has none).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

std::string GradientDumpPath(const std::string& dir, int stage);
std::string ParameterDumpPath(const std::string& dir, int step, int stage);

// The file's bytes; tensors are copied to the CPU.
std::string EncodeGradientDump(int stage, int step, double loss, const NamedTensors& grads);
std::string EncodeParameterDump(int stage, int step, const NamedTensors& params,
                                const std::vector<NamedTensors>& optimizer_state,
                                int optimizer_step);

// Reads a dump back (the tests): its dictionary, or an error naming what is wrong.
StatusOr<c10::impl::GenericDict> DecodeStageDump(const std::string& bytes);

}  // namespace pipeplan::torch_ext
