// One stage of the built-in model: `layers_per_stage` pre-norm transformer blocks
//   h = x + proj(attention(qkv(ln1(x))));  y = h + fc2(gelu(fc1(ln2(h))))
// with causal attention, parameters drawn from (seed, depth) so any placement of stages on
// ranks builds the same model. Linear layers defer their weight GEMMs (deferred_linear.h);
// the same stage in `kPlain` mode uses stock autograd, which is the reference's path.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "pipeplan/torch_ext/deferred_linear.h"
#include "pipeplan/torch_ext/model_config.h"
#include "pipeplan/torch_ext/stage_module.h"

namespace pipeplan::torch_ext {

enum class LinearMode : uint8_t {
  kDeferred,  // DeferredLinear: I leaves the weight GEMMs for W
  kPlain,     // at::linear: stock autograd
};

class TransformerStage final : public StageModule {
 public:
  // Stage `stage` of the plan, with the weights of the model's stage `depth` (they differ
  // only for dual placement's second copy, StageMap::DepthOf).
  TransformerStage(const ModelConfig& config, int stage, int depth, at::Device device);
  TransformerStage(const ModelConfig& config, int stage, at::Device device)
      : TransformerStage(config, stage, stage, device) {}

  // The stage's output for input `x` ([microbatch, sequence, hidden]).
  at::Tensor Forward(const at::Tensor& x, LinearMode mode, WeightGradStash* stash) const;
  at::Tensor Forward(const at::Tensor& x, WeightGradStash* stash) const override {
    return Forward(x, LinearMode::kDeferred, stash);
  }

  BackwardSplit split() const override { return BackwardSplit::kDeferredGemms; }
  // The W of one microbatch: runs its stashed weight GEMMs into the parameters' grads.
  void ApplyWeightGrads(WeightGradStash& stash) override;
  // The LayerNorm parameters: elementwise, so their gradients are taken with the input
  // gradients in I rather than deferred to W.
  std::vector<at::Tensor> InputPhaseParameters() const override;

  // Every parameter with its name ("layer1.fc2.weight"), in a fixed order.
  const std::vector<at::Tensor>& parameters() const override { return parameters_; }
  const std::vector<std::string>& parameter_names() const override { return names_; }

  int stage() const override { return stage_; }

 private:
  struct Linear {
    at::Tensor weight;
    at::Tensor bias;
  };
  struct Block {
    at::Tensor ln1_weight, ln1_bias;
    int qkv = 0, proj = 0;  // indices into linears_
    at::Tensor ln2_weight, ln2_bias;
    int fc1 = 0, fc2 = 0;
  };

  at::Tensor ApplyLinear(int index, const at::Tensor& x, LinearMode mode,
                         WeightGradStash* stash) const;
  at::Tensor Attention(const at::Tensor& qkv) const;

  ModelConfig config_;
  int stage_;
  std::vector<Linear> linears_;
  std::vector<Block> blocks_;
  at::Tensor causal_mask_;  // [sequence, sequence]: 0 on and below the diagonal, -inf above
  std::vector<at::Tensor> parameters_;
  std::vector<std::string> names_;
};

// Synthetic data of one microbatch, the same wherever it is drawn: the first stage's input
// and the last stage's target.
at::Tensor MicrobatchInput(const ModelConfig& config, int microbatch, at::Device device);
at::Tensor MicrobatchTarget(const ModelConfig& config, int microbatch, at::Device device);

// The last stage's loss for one microbatch: mean squared error scaled by 1 / microbatches,
// so the step's loss and gradients are those of the mean over the whole batch.
at::Tensor MicrobatchLoss(const at::Tensor& output, const at::Tensor& target, int microbatches);

}  // namespace pipeplan::torch_ext
