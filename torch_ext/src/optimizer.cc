#include "pipeplan/torch_ext/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace pipeplan::torch_ext {
namespace {

// The parameters that have a gradient this step, with it. The updates run as torch's
// optimizers do by default on a GPU, one multi-tensor kernel per step of the formula rather
// than one per parameter: launched one by one, a model's hundreds of small kernels would
// leave the device idle between them.
struct WithGradients {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> grads;
  std::vector<size_t> indices;  // into the optimizer's parameters
};

WithGradients WithGradientsOf(const std::vector<at::Tensor>& parameters) {
  WithGradients with;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].grad().defined()) continue;
    with.params.push_back(parameters[i]);
    with.grads.push_back(parameters[i].grad());
    with.indices.push_back(i);
  }
  return with;
}

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<at::Tensor> parameters, const OptimizerOptions& options)
      : parameters_(std::move(parameters)), options_(options) {}

  void Update() override {
    const c10::NoGradGuard no_grad;
    ++steps_;
    const WithGradients with = WithGradientsOf(parameters_);
    if (with.params.empty()) return;
    at::_foreach_add_(with.params, with.grads, -options_.learning_rate);
  }
  std::vector<std::pair<std::string, at::Tensor>> StateOf(size_t /*index*/) const override {
    return {};
  }
  int steps() const override { return steps_; }

 protected:
  const std::vector<at::Tensor>& parameters() const override { return parameters_; }
  std::vector<at::Tensor> StateTensors() const override { return {}; }
  void set_steps(int steps) override { steps_ = steps; }

 private:
  std::vector<at::Tensor> parameters_;
  OptimizerOptions options_;
  int steps_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<at::Tensor> parameters, const OptimizerOptions& options)
      : parameters_(std::move(parameters)), options_(options) {
    for (const at::Tensor& p : parameters_) {
      first_.push_back(at::zeros_like(p));
      second_.push_back(at::zeros_like(p));
    }
  }

  void Update() override {
    const c10::NoGradGuard no_grad;
    ++steps_;
    const double correction1 = 1.0 - std::pow(options_.beta1, steps_);
    const double correction2 = 1.0 - std::pow(options_.beta2, steps_);
    const WithGradients with = WithGradientsOf(parameters_);
    if (with.params.empty()) return;
    std::vector<at::Tensor> first;
    std::vector<at::Tensor> second;
    for (const size_t i : with.indices) {
      first.push_back(first_[i]);
      second.push_back(second_[i]);
    }
    at::_foreach_mul_(with.params, 1.0 - options_.learning_rate * options_.weight_decay);
    at::_foreach_mul_(first, options_.beta1);
    at::_foreach_add_(first, with.grads, 1.0 - options_.beta1);
    at::_foreach_mul_(second, options_.beta2);
    at::_foreach_addcmul_(second, with.grads, with.grads, 1.0 - options_.beta2);
    std::vector<at::Tensor> denom = at::_foreach_div(second, correction2);
    at::_foreach_sqrt_(denom);
    at::_foreach_add_(denom, options_.epsilon);
    at::_foreach_addcdiv_(with.params, first, denom, -options_.learning_rate / correction1);
  }
  std::vector<std::pair<std::string, at::Tensor>> StateOf(size_t index) const override {
    if (index >= parameters_.size()) return {};
    return {{"exp_avg", first_[index]}, {"exp_avg_sq", second_[index]}};
  }
  int steps() const override { return steps_; }

 protected:
  const std::vector<at::Tensor>& parameters() const override { return parameters_; }
  std::vector<at::Tensor> StateTensors() const override {
    std::vector<at::Tensor> all = first_;
    all.insert(all.end(), second_.begin(), second_.end());
    return all;
  }
  void set_steps(int steps) override { steps_ = steps; }

 private:
  std::vector<at::Tensor> parameters_;
  OptimizerOptions options_;
  std::vector<at::Tensor> first_;
  std::vector<at::Tensor> second_;
  int steps_ = 0;
};

int64_t Bytes(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (t.defined()) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

}  // namespace

int64_t OptimizerSnapshot::bytes() const { return Bytes(params) + Bytes(state); }

void Optimizer::ZeroGrads() {
  const WithGradients with = WithGradientsOf(parameters());
  if (!with.grads.empty()) at::_foreach_zero_(with.grads);
}

OptimizerSnapshot Optimizer::Save() const {
  const c10::NoGradGuard no_grad;
  OptimizerSnapshot snapshot;
  snapshot.steps = steps();
  for (const at::Tensor& p : parameters()) snapshot.params.push_back(p.detach().clone());
  for (const at::Tensor& t : StateTensors()) snapshot.state.push_back(t.clone());
  return snapshot;
}

void Optimizer::Restore(const OptimizerSnapshot& snapshot) {
  const c10::NoGradGuard no_grad;
  const std::vector<at::Tensor>& live = parameters();
  for (size_t i = 0; i < live.size() && i < snapshot.params.size(); ++i) {
    live[i].detach().copy_(snapshot.params[i]);
  }
  const std::vector<at::Tensor> state = StateTensors();
  for (size_t i = 0; i < state.size() && i < snapshot.state.size(); ++i) {
    state[i].copy_(snapshot.state[i]);
  }
  set_steps(snapshot.steps);
}

StatusOr<OptimizerKind> ParseOptimizerKind(std::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adamw") return OptimizerKind::kAdamW;
  return InvalidArgument("unknown optimizer '" + std::string(name) + "' (expected sgd or adamw)");
}

std::unique_ptr<Optimizer> MakeOptimizer(std::vector<at::Tensor> parameters,
                                         const OptimizerOptions& options) {
  switch (options.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<Sgd>(std::move(parameters), options);
    case OptimizerKind::kAdamW:
      return std::make_unique<AdamW>(std::move(parameters), options);
  }
  return nullptr;
}

}  // namespace pipeplan::torch_ext
