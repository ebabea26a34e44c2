#include "pipeplan/torch_ext/gradient_state.h"

#include <ATen/ATen.h>

#include <cmath>

namespace pipeplan::torch_ext {

void WriteLocalGradientState(const std::vector<at::Tensor>& parameters, at::Tensor& row) {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad(), 2).to(at::kDouble));
  }
  const at::Tensor squared =
      norms.empty() ? at::zeros({}, row.options()) : at::stack(norms).square().sum();
  row[0].copy_(squared);
  row[1].copy_(at::isfinite(squared).to(at::kDouble));
}

GlobalGradientState SumGradientStates(const at::Tensor& table) {
  const at::Tensor host = table.to(at::kCPU).contiguous();
  const double* values = host.data_ptr<double>();
  double squared = 0;
  bool finite = true;
  for (int64_t r = 0; r < host.size(0); ++r) {
    squared += values[r * kGradientStateValues];
    finite = finite && values[r * kGradientStateValues + 1] == 1.0;
  }
  finite = finite && std::isfinite(squared);
  return {.norm = std::sqrt(squared), .finite = finite};
}

bool NeedsClipping(double max_norm, double norm) { return max_norm / (norm + 1e-6) < 1.0; }

bool ClipGradients(const std::vector<at::Tensor>& parameters, double max_norm, double norm) {
  if (!NeedsClipping(max_norm, norm)) return false;
  const double coefficient = max_norm / (norm + 1e-6);
  for (const at::Tensor& p : parameters) {
    if (p.grad().defined()) p.mutable_grad().mul_(coefficient);
  }
  return true;
}

}  // namespace pipeplan::torch_ext
