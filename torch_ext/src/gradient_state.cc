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

at::Tensor FlattenGradients(const std::vector<at::Tensor>& parameters, double loss) {
  std::vector<at::Tensor> flat;
  flat.reserve(parameters.size() + 1);
  for (const at::Tensor& p : parameters) {
    const at::Tensor grad = p.grad().defined() ? p.grad() : at::zeros_like(p);
    flat.push_back(grad.detach().reshape({-1}).to(at::kFloat));
  }
  const auto options = at::TensorOptions().dtype(at::kFloat);
  flat.push_back(at::full(
      {1}, loss,
      options.device(parameters.empty() ? at::Device(at::kCPU) : parameters.front().device())));
  return at::cat(flat);
}

double AddFlatGradients(const at::Tensor& flat, const std::vector<at::Tensor>& parameters) {
  int64_t offset = 0;
  for (const at::Tensor& p : parameters) {
    const at::Tensor theirs = flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.scalar_type());
    offset += p.numel();
    if (p.grad().defined()) {
      p.mutable_grad().add_(theirs);
    } else {
      p.mutable_grad() = theirs.clone();
    }
  }
  return flat[offset].item<double>();
}

}  // namespace pipeplan::torch_ext
