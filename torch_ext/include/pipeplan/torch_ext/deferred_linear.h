// Splitting a backward into I (input gradients) and W (weight gradients) without doing any
// GEMM twice, as zero-bubble's WeightGradStore does: a linear layer whose backward computes
// its weight gradient only when autograd asks for it (a full B). When only input gradients
// are requested (I), it stashes (input, output gradient) and W runs the weight GEMMs later,
// so I + W costs one B and the activations are released at W.
#pragma once

#include <ATen/core/Tensor.h>

#include <mutex>
#include <vector>

namespace pipeplan::torch_ext {

// The deferred weight GEMMs of one (stage, microbatch). Filled by backward (possibly on an
// autograd device thread), applied by W.
class WeightGradStash {
 public:
  struct Entry {
    int layer = 0;  // index into the owner's linear layers
    at::Tensor input;
    at::Tensor grad_output;
  };

  void Add(Entry entry);
  // Takes every entry out, in the order backward produced them.
  std::vector<Entry> Take();
  bool empty() const;

 private:
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

// y = x W^T + b. Autograd asking for W's or b's gradient computes them in backward (B);
// otherwise, with `stash` given, the weight GEMM is stashed for W under `layer`.
at::Tensor DeferredLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          WeightGradStash* stash, int layer);

// The weight GEMMs of one stash entry: accumulates into weight.grad and bias.grad.
void AccumulateWeightGrads(const WeightGradStash::Entry& entry, at::Tensor& weight,
                           at::Tensor& bias);

}  // namespace pipeplan::torch_ext
