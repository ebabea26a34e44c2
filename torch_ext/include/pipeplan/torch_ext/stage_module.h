// One pipeline stage's model as the executor drives it: the built-in transformer stage or a
// user's TorchScript module. The stage decides how a backward splits into I and W.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "pipeplan/torch_ext/deferred_linear.h"

namespace pipeplan::torch_ext {

enum class BackwardSplit : uint8_t {
  // I asks autograd for the input's gradient and InputPhaseParameters()'; the weight GEMMs
  // are stashed during I and W runs them (ApplyWeightGrads): I + W costs one B.
  kDeferredGemms,
  // I runs autograd to the input only, keeping what W needs; W runs the parameters' side of
  // the graph from where it leaves the input's (graph_cut.h). Works for any module.
  kGraphCut,
};

class StageModule {
 public:
  virtual ~StageModule() = default;

  virtual int stage() const = 0;
  virtual BackwardSplit split() const = 0;
  // The stage's output for input `x`; deferred weight GEMMs go to `stash` (kDeferredGemms).
  virtual at::Tensor Forward(const at::Tensor& x, WeightGradStash* stash) const = 0;
  // kDeferredGemms: parameters whose gradients I takes with the input's (cheap, elementwise).
  virtual std::vector<at::Tensor> InputPhaseParameters() const = 0;
  // kDeferredGemms: the W of one microbatch, the stashed GEMMs into the parameters' grads.
  virtual void ApplyWeightGrads(WeightGradStash& stash) = 0;

  // Every parameter with its name, in a fixed order.
  virtual const std::vector<at::Tensor>& parameters() const = 0;
  virtual const std::vector<std::string>& parameter_names() const = 0;
};

}  // namespace pipeplan::torch_ext
