#include "pipeplan/torch_ext/backward_reference.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "pipeplan/torch_ext/deferred_linear.h"
#include "pipeplan/torch_ext/transformer_stage.h"

namespace pipeplan::torch_ext {
namespace {

void Synchronize(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::device_synchronize();
}

// One forward and the timed backward after it, in seconds.
double TimeOneBackward(const StageModule& stage, const ModelConfig& model,
                       const c10::Device& device, const BackwardReference& reference) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor input = at::randn({model.microbatch_size, model.sequence, model.hidden}, options)
                               .requires_grad_(true);
  WeightGradStash stash;
  const at::Tensor output = stage.Forward(input, &stash);
  at::Tensor root = output;
  std::vector<at::Tensor> upstream = {at::randn_like(output)};
  if (reference.last_stage) {
    root = MicrobatchLoss(output, at::randn_like(output), reference.microbatches);
    upstream.clear();
  }
  Synchronize(device);
  const auto begin = std::chrono::steady_clock::now();
  torch::autograd::backward({root}, upstream);
  Synchronize(device);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

}  // namespace

StatusOr<double> MedianBackwardSeconds(const StageModule& stage, const ModelConfig& model,
                                       const c10::Device& device,
                                       const BackwardReference& reference) {
  if (reference.repetitions < 1) return InvalidArgument("the reference needs a repetition");
  const c10::DeviceGuard on_device(device);  // what device_synchronize waits for
  const std::vector<at::Tensor>& parameters = stage.parameters();
  std::vector<at::Tensor> kept;
  kept.reserve(parameters.size());
  for (const at::Tensor& p : parameters) kept.push_back(p.grad());
  const auto restore = [&] {
    for (size_t i = 0; i < kept.size(); ++i) parameters[i].mutable_grad() = kept[i];
  };
  std::vector<double> seconds;
  try {
    for (int k = 0; k <= reference.repetitions; ++k) {
      for (const at::Tensor& p : parameters) p.mutable_grad() = at::Tensor();
      const double t = TimeOneBackward(stage, model, device, reference);
      if (k > 0) seconds.push_back(t);  // the first warms the allocator and the kernels up
    }
  } catch (const std::exception& e) {
    restore();
    return Internal("stage " + std::to_string(stage.stage()) +
                    ": the reference B failed: " + e.what());
  }
  restore();
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace pipeplan::torch_ext
