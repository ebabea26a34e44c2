// The I/W split of a user's TorchScript stage (graph_cut.h): I then W give B's gradients, and
// together run B's matrix products once, also after TorchScript's executor has warmed up;
// a weight tied along the chain falls back to W from the root and stays correct.
#include "pipeplan/torch_ext/graph_cut.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/script.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradient_check.h"
#include "matmul_flops.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/torch_ext/scripted_stage.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using testing::MatmulFlops;
using testing::TempDir;

constexpr int kHidden = 16;
constexpr int kTokens = 2 * 8;  // 2 samples of 8 tokens

// A TorchScript stage `stage` with `parameters` (name, shape) drawn from one seed, frozen
// unless `trainable`, and `forward`'s body.
std::unique_ptr<ScriptedStage> MakeStage(
    const TempDir& dir, const std::vector<std::pair<std::string, std::vector<int64_t>>>& parameters,
    const std::string& body, int stage_index = 0, bool trainable = true) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  torch::jit::Module module("Stage");
  for (const auto& [name, shape] : parameters) {
    module.register_parameter(name, (at::randn(shape, gen) * 0.2).requires_grad_(trainable),
                              /*is_buffer=*/false);
  }
  module.define("def forward(self, x):\n" + body);
  const std::string path = ScriptedStagePath(dir.path(), stage_index);
  module.save(path);
  auto stage = ScriptedStage::Load(path, stage_index, at::kCPU);
  EXPECT_TRUE(stage.ok()) << stage.status().message();
  return stage.ok() ? std::move(*stage) : nullptr;
}

struct Gradients {
  at::Tensor input;
  std::vector<at::Tensor> parameters;  // undefined where the backward left none
};

// One microbatch through `stage`: F, then B (split false) or I then W, each counted under its
// phase's name when `flops` is given.
Gradients Backward(ScriptedStage& stage, bool split, MatmulFlops* flops = nullptr,
                   bool* split_at_intermediates = nullptr) {
  const auto phase = [&](const char* name) {
    if (flops != nullptr) flops->Phase(name);
  };
  for (const at::Tensor& p : stage.parameters()) p.mutable_grad().reset();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor x = at::randn({2, 8, kHidden}, gen).requires_grad_(true);
  const at::Tensor grad = at::randn({2, 8, kHidden}, gen);
  phase("F");
  const at::Tensor y = stage.Forward(x, nullptr);
  if (split) {
    phase("I");
    GraphCut cut = GraphCut::RunInput(y, {grad}, x, stage.parameters());
    if (split_at_intermediates != nullptr) *split_at_intermediates = cut.splits_at_intermediates();
    for (const at::Tensor& p : stage.parameters()) {
      EXPECT_FALSE(p.grad().defined()) << "I accumulated a parameter's gradient";
    }
    phase("W");
    EXPECT_TRUE(cut.RunWeight());
    phase("");
    EXPECT_FALSE(cut.RunWeight()) << "W ran twice";
  } else {
    phase("B");
    torch::autograd::backward({y}, {grad});
  }
  phase("");
  Gradients out{.input = x.grad().clone(), .parameters = {}};
  for (const at::Tensor& p : stage.parameters()) {
    out.parameters.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  }
  return out;
}

void ExpectSameGradients(const Gradients& got, const Gradients& want) {
  EXPECT_TRUE(at::allclose(got.input, want.input, 1e-6, 1e-7)) << "input gradient";
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (size_t i = 0; i < got.parameters.size(); ++i) {
    ASSERT_EQ(got.parameters[i].defined(), want.parameters[i].defined()) << "parameter " << i;
    if (!want.parameters[i].defined()) continue;
    EXPECT_TRUE(at::allclose(got.parameters[i], want.parameters[i], 1e-6, 1e-7))
        << "parameter " << i;
  }
}

// Runs B, then I and W, counting both: the split starts W at the intermediates, gives B's
// gradients and runs B's matrix products once. Returns the split's gradients.
Gradients ExpectSplitAtIntermediatesLikeB(ScriptedStage& stage, MatmulFlops& flops) {
  const Gradients whole = Backward(stage, false, &flops);
  bool split_at_intermediates = false;
  Gradients split = Backward(stage, true, &flops, &split_at_intermediates);
  ExpectSameGradients(split, whole);
  EXPECT_TRUE(split_at_intermediates);
  EXPECT_EQ(flops["I"] + flops["W"], flops["B"])
      << "I " << flops["I"] << " + W " << flops["W"] << " vs B " << flops["B"];
  return split;
}

// The residual MLP of examples/make_stage_modules.py, without its norm: two linears, one
// parameter the forward does not use.
std::unique_ptr<ScriptedStage> MlpStage(const TempDir& dir) {
  return MakeStage(dir,
                   {{"w1", {4 * kHidden, kHidden}},
                    {"b1", {4 * kHidden}},
                    {"w2", {kHidden, 4 * kHidden}},
                    {"b2", {kHidden}},
                    {"unused", {kHidden}}},
                   "    h = torch.tanh(torch.matmul(x, self.w1.t()) + self.b1)\n"
                   "    return x + torch.matmul(h, self.w2.t()) + self.b2\n");
}

TEST(GraphCut, IPlusWGiveBsGradientsAndRunBsMatrixProductsOnce) {
  const TempDir dir("graph-cut-mlp");
  const std::unique_ptr<ScriptedStage> stage = MlpStage(dir);
  ASSERT_NE(stage, nullptr);
  // TorchScript's optimising executor would take over after its profiling runs: warm it up.
  for (int i = 0; i < 4; ++i) Backward(*stage, i % 2 == 0);
  MatmulFlops flops;
  const Gradients split = ExpectSplitAtIntermediatesLikeB(*stage, flops);
  EXPECT_FALSE(split.parameters[4].defined()) << "the unused parameter got a gradient";
  // W is the two weight GEMMs, grad^T [out, tokens] x input [tokens, in]: 2 x 2 tokens 4 h^2.
  EXPECT_EQ(flops["W"], int64_t{2} * 2 * kTokens * 4 * kHidden * kHidden);
  EXPECT_EQ(flops[""], 0) << "matrix products outside F, B, I and W";
}

// One weight in two places side by side (both products read the input): W runs from both
// places in one autograd run, which sums the weight's two gradients once each.
TEST(GraphCut, AWeightUsedSideBySideStillSplits) {
  const TempDir dir("graph-cut-side");
  const std::unique_ptr<ScriptedStage> stage = MakeStage(
      dir, {{"w", {kHidden, kHidden}}},
      "    return torch.matmul(x, self.w.t()) + torch.matmul(torch.tanh(x), self.w.t())\n");
  ASSERT_NE(stage, nullptr);
  MatmulFlops flops;
  ExpectSplitAtIntermediatesLikeB(*stage, flops);
}

// One weight in two consecutive layers: the second product's node leads to the first along
// the input's chain, so W from both would count the first one's gradient twice. W runs from
// the root instead: the gradients stay B's.
TEST(GraphCut, AWeightTiedAlongTheChainFallsBackToWFromTheRoot) {
  const TempDir dir("graph-cut-tied");
  const std::unique_ptr<ScriptedStage> stage =
      MakeStage(dir, {{"w", {kHidden, kHidden}}, {"b", {kHidden}}},
                "    h = torch.tanh(torch.matmul(x, self.w.t()))\n"
                "    return torch.matmul(h, self.w.t()) + self.b\n");
  ASSERT_NE(stage, nullptr);
  const Gradients whole = Backward(*stage, false);
  bool split_at_intermediates = true;
  const Gradients split = Backward(*stage, true, nullptr, &split_at_intermediates);
  ExpectSameGradients(split, whole);
  EXPECT_FALSE(split_at_intermediates);
}

// The first stage's input is data: a full B takes no gradient of it, so a one-product stage
// runs its weight's product alone (F's and B's: 2 products a step); under an I/W split the
// graph cut needs the input's gradient, and I runs its product as before (3 products).
TorchExecutorOptions ScriptedOptions(const TempDir& dir) {
  TorchExecutorOptions options;
  options.model.hidden = kHidden;
  options.model.sequence = 8;
  options.model.microbatch_size = 2;  // kTokens
  options.stage_modules = dir.path();
  return options;
}

StatusOr<Plan> OneF1BPlan(int ranks) {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = ranks;
  request.topology.microbatches = ranks;
  return BuildPlan(request);
}

TEST(FirstStage, AFullBackwardTakesNoGradientOfTheData) {
  const TempDir dir("first-stage");
  ASSERT_NE(MakeStage(dir, {{"w", {kHidden, kHidden}}}, "    return torch.matmul(x, self.w.t())\n"),
            nullptr);
  const TorchExecutorOptions options = ScriptedOptions(dir);
  const int64_t product = int64_t{2} * kTokens * kHidden * kHidden;
  for (const auto& [strategy, products] : {std::pair{"1f1b", 2}, std::pair{"zb-h1", 3}}) {
    PlanRequest request;
    request.strategy = strategy;
    request.topology.ranks = 1;
    request.topology.microbatches = 1;
    const StatusOr<Plan> plan = BuildPlan(request);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    MatmulFlops flops;
    flops.Phase(strategy);
    const testing::StepResult step = testing::RunInProcess(*plan, options);
    EXPECT_TRUE(step.grads.count(0) == 1 && step.grads.at(0).count("w") == 1) << strategy;
    EXPECT_EQ(flops[strategy], products * product) << strategy;
  }
}

// A first stage whose parameters are all frozen (a frozen embedding, say) then has nothing to
// differentiate: its B runs no backward, and the next stage still trains.
TEST(FirstStage, AllFrozenItsBackwardIsSkippedAndTheNextStageTrains) {
  const TempDir dir("first-stage-frozen");
  const std::string body = "    return torch.matmul(x, self.w.t())\n";
  ASSERT_NE(MakeStage(dir, {{"w", {kHidden, kHidden}}}, body, 0, /*trainable=*/false), nullptr);
  ASSERT_NE(MakeStage(dir, {{"w", {kHidden, kHidden}}}, body, 1), nullptr);
  const StatusOr<Plan> plan = OneF1BPlan(2);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const testing::StepResult step = testing::RunInProcess(*plan, ScriptedOptions(dir));
  EXPECT_TRUE(std::isfinite(step.loss));
  EXPECT_TRUE(step.grads.count(0) == 0 || step.grads.at(0).empty()) << "a frozen stage's gradient";
  ASSERT_TRUE(step.grads.count(1) == 1 && step.grads.at(1).count("w") == 1);
  EXPECT_GT(step.grads.at(1).at("w").abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace pipeplan::torch_ext
