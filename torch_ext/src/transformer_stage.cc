#include "pipeplan/torch_ext/transformer_stage.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

namespace pipeplan::torch_ext {
namespace {

constexpr double kInitStd = 0.02;

// Distinct, stable streams for parameters, inputs and targets (splitmix64 of the pieces).
uint64_t Mix(uint64_t seed, uint64_t domain, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (domain * 1000003ULL + index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

enum Domain : uint64_t { kParameters = 1, kInputs = 2, kTargets = 3 };

at::Tensor Normal(at::Generator& gen, at::IntArrayRef shape, double std, at::Device device) {
  return (at::randn(shape, gen, at::kFloat) * std).to(device);
}

}  // namespace

TransformerStage::TransformerStage(const ModelConfig& config, int stage, int depth,
                                   at::Device device)
    : config_(config), stage_(stage) {
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(Mix(config.seed, kParameters, depth));
  const int64_t h = config.hidden;
  const auto add_param = [&](at::Tensor t, const std::string& name) {
    t.requires_grad_(true);
    parameters_.push_back(t);
    names_.push_back(name);
    return t;
  };
  const auto add_linear = [&](int64_t out, int64_t in, const std::string& name) {
    Linear linear;
    linear.weight = add_param(Normal(gen, {out, in}, kInitStd, device), name + ".weight");
    linear.bias = add_param(at::zeros({out}, at::TensorOptions().device(device)), name + ".bias");
    linears_.push_back(linear);
    return static_cast<int>(linears_.size() - 1);
  };
  const auto ones = [&] { return at::ones({h}, at::TensorOptions().device(device)); };
  const auto zeros = [&] { return at::zeros({h}, at::TensorOptions().device(device)); };
  for (int l = 0; l < config.layers_per_stage; ++l) {
    const std::string prefix = "layer" + std::to_string(l) + ".";
    Block block;
    block.ln1_weight = add_param(ones(), prefix + "ln1.weight");
    block.ln1_bias = add_param(zeros(), prefix + "ln1.bias");
    block.qkv = add_linear(3 * h, h, prefix + "qkv");
    block.proj = add_linear(h, h, prefix + "proj");
    block.ln2_weight = add_param(ones(), prefix + "ln2.weight");
    block.ln2_bias = add_param(zeros(), prefix + "ln2.bias");
    block.fc1 = add_linear(4 * h, h, prefix + "fc1");
    block.fc2 = add_linear(h, 4 * h, prefix + "fc2");
    blocks_.push_back(block);
  }
  const int64_t t = config.sequence;
  causal_mask_ = at::triu(at::full({t, t}, -std::numeric_limits<float>::infinity()), 1).to(device);
}

at::Tensor TransformerStage::ApplyLinear(int index, const at::Tensor& x, LinearMode mode,
                                         WeightGradStash* stash) const {
  const Linear& linear = linears_[index];
  switch (mode) {
    case LinearMode::kDeferred:
      return DeferredLinear(x, linear.weight, linear.bias, stash, index);
    case LinearMode::kPlain:
      return at::linear(x, linear.weight, linear.bias);
  }
  return {};
}

at::Tensor TransformerStage::Attention(const at::Tensor& qkv) const {
  const int64_t b = qkv.size(0), t = qkv.size(1), h = config_.hidden, heads = config_.heads;
  const int64_t d = h / heads;
  // [b, t, 3, heads, d] -> three [b, heads, t, d]
  const at::Tensor split = qkv.view({b, t, 3, heads, d}).permute({2, 0, 3, 1, 4});
  const at::Tensor q = split[0], k = split[1], v = split[2];
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  const at::Tensor weights = at::softmax(scores + causal_mask_, -1);
  return at::matmul(weights, v).transpose(1, 2).reshape({b, t, h});
}

at::Tensor TransformerStage::Forward(const at::Tensor& x, LinearMode mode,
                                     WeightGradStash* stash) const {
  const int64_t h = config_.hidden;
  at::Tensor hidden = x;
  for (const Block& block : blocks_) {
    const at::Tensor a = at::layer_norm(hidden, {h}, block.ln1_weight, block.ln1_bias);
    const at::Tensor attended = Attention(ApplyLinear(block.qkv, a, mode, stash));
    hidden = hidden + ApplyLinear(block.proj, attended, mode, stash);
    const at::Tensor m = at::layer_norm(hidden, {h}, block.ln2_weight, block.ln2_bias);
    const at::Tensor up = at::gelu(ApplyLinear(block.fc1, m, mode, stash));
    hidden = hidden + ApplyLinear(block.fc2, up, mode, stash);
  }
  return hidden;
}

void TransformerStage::ApplyWeightGrads(WeightGradStash& stash) {
  for (const WeightGradStash::Entry& entry : stash.Take()) {
    Linear& linear = linears_[entry.layer];
    AccumulateWeightGrads(entry, linear.weight, linear.bias);
  }
}

std::vector<at::Tensor> TransformerStage::InputPhaseParameters() const {
  std::vector<at::Tensor> norms;
  for (const Block& block : blocks_) {
    norms.insert(norms.end(), {block.ln1_weight, block.ln1_bias, block.ln2_weight, block.ln2_bias});
  }
  return norms;
}

at::Tensor MicrobatchInput(const ModelConfig& config, int microbatch, at::Device device) {
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(Mix(config.seed, kInputs, microbatch));
  return Normal(gen, {config.microbatch_size, config.sequence, config.hidden}, 1.0, device);
}

at::Tensor MicrobatchTarget(const ModelConfig& config, int microbatch, at::Device device) {
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(Mix(config.seed, kTargets, microbatch));
  return Normal(gen, {config.microbatch_size, config.sequence, config.hidden}, 1.0, device);
}

at::Tensor MicrobatchLoss(const at::Tensor& output, const at::Tensor& target, int microbatches) {
  return at::mse_loss(output, target) / static_cast<double>(microbatches);
}

}  // namespace pipeplan::torch_ext
