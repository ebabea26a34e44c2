// The global gradient state a step's optimizer decision needs (clip to a global norm, skip a
// step that is not finite), in the layout the gradient-state exchange carries between ranks
// (op_executor.h): per rank two float64, the sum of the squares of its gradients' L2 norms and
// 1 if that sum is finite (else 0). Norms are taken per tensor in the gradients' dtype and
// summed in float64, as torch.nn.utils.clip_grad_norm_ takes them (it sums in float32).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace pipeplan::torch_ext {

// Dual placement's sum of the two model copies' gradients (op_executor.h, GradientMirror):
// the gradients of `parameters` (zeros where none accumulated) as float32, then `loss`, in
// one flat tensor on their device; and such a tensor from the mirror, whose parameters are
// these ones' other copies in the same order, added into their gradients (its loss returned).
at::Tensor FlattenGradients(const std::vector<at::Tensor>& parameters, double loss);
double AddFlatGradients(const at::Tensor& flat, const std::vector<at::Tensor>& parameters);

inline constexpr int kGradientStateValues = 2;

// Writes this rank's state into `row` (float64, kGradientStateValues), without waiting for
// the device. Gradients never accumulated count as zero.
void WriteLocalGradientState(const std::vector<at::Tensor>& parameters, at::Tensor& row);

struct GlobalGradientState {
  double norm = 0;  // the L2 norm over every rank's gradients
  bool finite = true;
};

// Sums the rows of `table` ([ranks, kGradientStateValues], float64) in rank order, so that
// every rank gets the same bits.
GlobalGradientState SumGradientStates(const at::Tensor& table);

// Whether torch.nn.utils.clip_grad_norm_'s rule scales gradients of this norm: when
// max_norm / (norm + 1e-6) is below 1.
bool NeedsClipping(double max_norm, double norm);

// torch.nn.utils.clip_grad_norm_'s rule: scales every gradient by max_norm / (norm + 1e-6)
// when that is below 1. Returns whether it did.
bool ClipGradients(const std::vector<at::Tensor>& parameters, double max_norm, double norm);

}  // namespace pipeplan::torch_ext
