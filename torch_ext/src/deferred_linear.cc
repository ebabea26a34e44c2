#include "pipeplan/torch_ext/deferred_linear.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <utility>

namespace pipeplan::torch_ext {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Reshapes to 2-D for the weight GEMM: [tokens, features].
at::Tensor Flatten(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

void AddGrad(at::Tensor& param, const at::Tensor& grad) {
  at::Tensor& current = param.mutable_grad();
  if (current.defined()) {
    current.add_(grad);
  } else {
    current = grad.detach().clone();
  }
}

struct DeferredLinearFunction : torch::autograd::Function<DeferredLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, int64_t stash, int64_t layer) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["stash"] = stash;
    ctx->saved_data["layer"] = layer;
    return at::linear(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& grad = grads[0];
    at::Tensor grad_x, grad_weight, grad_bias;
    if (ctx->needs_input_grad(0)) grad_x = at::matmul(grad, weight);
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      const at::Tensor g = Flatten(grad);
      grad_weight = g.t().mm(Flatten(x));
      grad_bias = g.sum(0);
    } else if (auto* stash =
                   reinterpret_cast<WeightGradStash*>(  // NOLINT(performance-no-int-to-ptr)
                       ctx->saved_data["stash"].toInt())) {
      stash->Add({static_cast<int>(ctx->saved_data["layer"].toInt()), x, grad});
    }
    return {grad_x, grad_weight, grad_bias, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

void WeightGradStash::Add(Entry entry) {
  const std::lock_guard lock(mutex_);
  entries_.push_back(std::move(entry));
}

std::vector<WeightGradStash::Entry> WeightGradStash::Take() {
  const std::lock_guard lock(mutex_);
  return std::exchange(entries_, {});
}

bool WeightGradStash::empty() const {
  const std::lock_guard lock(mutex_);
  return entries_.empty();
}

at::Tensor DeferredLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          WeightGradStash* stash, int layer) {
  return DeferredLinearFunction::apply(x, weight, bias, reinterpret_cast<int64_t>(stash),
                                       static_cast<int64_t>(layer));
}

void AccumulateWeightGrads(const WeightGradStash::Entry& entry, at::Tensor& weight,
                           at::Tensor& bias) {
  const c10::NoGradGuard no_grad;
  const at::Tensor g = Flatten(entry.grad_output);
  AddGrad(weight, g.t().mm(Flatten(entry.input)));
  AddGrad(bias, g.sum(0));
}

}  // namespace pipeplan::torch_ext
