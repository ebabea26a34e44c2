#include "pipeplan/torch_ext/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <string>
#include <utility>

namespace pipeplan::torch_ext {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<at::Tensor> parameters, const OptimizerOptions& options)
      : parameters_(std::move(parameters)), options_(options) {}

  void Update() override {
    const c10::NoGradGuard no_grad;
    ++steps_;
    for (at::Tensor& p : parameters_) {
      if (p.grad().defined()) p.add_(p.grad(), -options_.learning_rate);
    }
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
    for (size_t i = 0; i < parameters_.size(); ++i) {
      at::Tensor& p = parameters_[i];
      if (!p.grad().defined()) continue;
      const at::Tensor& g = p.grad();
      p.mul_(1.0 - options_.learning_rate * options_.weight_decay);
      first_[i].mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
      second_[i].mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
      const at::Tensor denom = (second_[i] / correction2).sqrt_().add_(options_.epsilon);
      p.addcdiv_(first_[i], denom, -options_.learning_rate / correction1);
    }
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
  for (const at::Tensor& p : parameters()) {
    if (p.grad().defined()) p.grad().zero_();
  }
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
