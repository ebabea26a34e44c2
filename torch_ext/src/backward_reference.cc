#include "pipeplan/torch_ext/backward_reference.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
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

Status Cuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::Ok();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

// Times each backward as a step's ops are timed. On a GPU: CUDA events on the current stream,
// nothing synchronised until the last, so that the host queues the next forward while the
// device runs a backward, as in a step (a host clock between synchronisations would count
// the launches of a launch-bound backward too). On the CPU: the host clock.
class Stopwatch {
 public:
  explicit Stopwatch(const c10::Device& device) : device_(device) {}
  ~Stopwatch() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

  Status Mark() {
    if (!device_.is_cuda()) {
      host_.push_back(std::chrono::steady_clock::now());
      return Status::Ok();
    }
    cudaEvent_t event = nullptr;
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventCreate(&event), "cudaEventCreate"));
    events_.push_back(event);
    return Cuda(cudaEventRecord(event, c10::cuda::getCurrentCUDAStream(device_.index()).stream()),
                "cudaEventRecord");
  }

  // Seconds between marks 2k and 2k + 1, for every k.
  StatusOr<std::vector<double>> Spans() const {
    std::vector<double> seconds;
    for (size_t k = 0; k + 1 < Marks(); k += 2) {
      if (!device_.is_cuda()) {
        seconds.push_back(std::chrono::duration<double>(host_[k + 1] - host_[k]).count());
        continue;
      }
      PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(events_[k + 1]), "cudaEventSynchronize"));
      float ms = 0;
      PIPEPLAN_RETURN_IF_ERROR(
          Cuda(cudaEventElapsedTime(&ms, events_[k], events_[k + 1]), "cudaEventElapsedTime"));
      seconds.push_back(static_cast<double>(ms) * 1e-3);
    }
    return seconds;
  }

 private:
  size_t Marks() const { return device_.is_cuda() ? events_.size() : host_.size(); }

  c10::Device device_;
  std::vector<cudaEvent_t> events_;
  std::vector<std::chrono::steady_clock::time_point> host_;
};

// One forward and the backward after it, marked before and after the backward.
Status RunOneBackward(const StageModule& stage, const ModelConfig& model, const c10::Device& device,
                      const BackwardReference& reference, Stopwatch& stopwatch) {
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
  PIPEPLAN_RETURN_IF_ERROR(stopwatch.Mark());
  torch::autograd::backward({root}, upstream);
  return stopwatch.Mark();
}

}  // namespace

StatusOr<double> MedianBackwardSeconds(const StageModule& stage, const ModelConfig& model,
                                       const c10::Device& device,
                                       const BackwardReference& reference) {
  if (reference.repetitions < 1) return InvalidArgument("the reference needs a repetition");
  const c10::DeviceGuard on_device(device);
  const std::vector<at::Tensor>& parameters = stage.parameters();
  std::vector<at::Tensor> kept;
  kept.reserve(parameters.size());
  for (const at::Tensor& p : parameters) kept.push_back(p.grad());
  const auto restore = [&] {
    for (size_t i = 0; i < kept.size(); ++i) parameters[i].mutable_grad() = kept[i];
  };
  Stopwatch stopwatch(device);
  StatusOr<std::vector<double>> spans = std::vector<double>{};
  try {
    Status ran = Status::Ok();
    for (int k = 0; k <= reference.repetitions && ran.ok(); ++k) {
      for (const at::Tensor& p : parameters) p.mutable_grad() = at::Tensor();
      ran = RunOneBackward(stage, model, device, reference, stopwatch);
    }
    spans = ran.ok() ? stopwatch.Spans() : StatusOr<std::vector<double>>(ran);
  } catch (const std::exception& e) {
    spans = Internal(e.what());
  }
  restore();
  if (!spans.ok()) {
    return spans.status().WithContext("stage " + std::to_string(stage.stage()) +
                                      ": the reference B failed");
  }
  // The first warms the allocator and the kernels up.
  std::vector<double> seconds(spans->begin() + 1, spans->end());
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace pipeplan::torch_ext
