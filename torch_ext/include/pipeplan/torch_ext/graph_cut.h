// The I/W split of a backward that autograd records op by op (BackwardSplit::kGraphCut: a
// user's TorchScript stage, whose weight GEMMs cannot be deferred from outside).
//
// I differentiates the stage's input only. On its way it keeps the gradient arriving at each
// node where a parameter's chain of ops leaves the input's chain (the "intermediates" of
// torch.distributed.pipelining's split). W starts from those nodes with those gradients, one
// autograd run per group of parameters that share them, and asks only for the parameters: it
// runs the parameters' side of the backward and nothing of the input's, so I + W runs each of
// B's ops once. Between I and W the saved tensors of the ops only I needed are freed.
//
// One parameter used twice along one chain (tied weights in consecutive layers) would have W
// count a gradient twice from those nodes; there W runs the whole backward from the root
// again, to the parameters only (correct, slower: the old split).
//
// Errors are autograd's exceptions. Not thread-safe; one per (stage, microbatch).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace pipeplan::torch_ext {

class GraphCut {
 public:
  // I: accumulates d root / d input into input.grad. `root_grads` is root's gradient (empty
  // for a scalar loss: one). `input` is the leaf the stage ran on; `parameters` those W
  // will differentiate (the ones this forward did not use are left alone, as in a B).
  static GraphCut RunInput(const at::Tensor& root, const std::vector<at::Tensor>& root_grads,
                           const at::Tensor& input, const std::vector<at::Tensor>& parameters);

  // W: accumulates the parameters' gradients into their .grad. Once; false if already run.
  bool RunWeight();

  // Whether W starts at the intermediates (false: the tied-weights case, W from the root).
  bool splits_at_intermediates() const;

 private:
  struct State;
  explicit GraphCut(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

}  // namespace pipeplan::torch_ext
