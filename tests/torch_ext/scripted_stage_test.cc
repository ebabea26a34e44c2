// User TorchScript stages (--stage-modules): modules built and saved here with the C++
// TorchScript API run under several schedules (I/W split by graph cut included), in-process
// and over Gloo, and give the loss and gradients of the same modules run in sequence with
// stock autograd. Bad modules fail with errors naming the file or the shape.
#include "pipeplan/torch_ext/scripted_stage.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "pipeplan/planner/planner.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using testing::ExpectMatches;
using testing::ModelFlags;
using testing::OnEveryStage;
using testing::Reference;
using testing::RunInProcess;
using testing::RunOverGloo;
using testing::StepResult;
using testing::TempDir;

ModelConfig DataShape() {
  ModelConfig config;
  config.hidden = 16;
  config.sequence = 8;
  config.microbatch_size = 2;
  config.seed = 5;
  return config;
}

// A residual MLP with a frozen buffer: x + scale * (tanh(x W1^T + b1) W2^T + b2).
// `out_features` other than hidden makes a module whose output has the wrong shape.
void SaveMlpStage(const std::string& path, int hidden, uint64_t seed, int out_features) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::jit::Module module("MlpStage");
  const auto parameter = [&](const char* name, at::Tensor value) {
    module.register_parameter(name, value.requires_grad_(true), /*is_buffer=*/false);
  };
  parameter("w1", at::randn({2 * hidden, hidden}, gen) * 0.2);
  parameter("b1", at::randn({2 * hidden}, gen) * 0.1);
  parameter("w2", at::randn({out_features, 2 * hidden}, gen) * 0.2);
  parameter("b2", at::zeros({out_features}));
  module.register_buffer("scale", at::full({1}, 0.5));
  const std::string residual = out_features == hidden ? "x + " : "";
  module.define(R"(
def forward(self, x):
    h = torch.tanh(torch.matmul(x, self.w1.t()) + self.b1)
    return )" + residual +
                R"(self.scale * (torch.matmul(h, self.w2.t()) + self.b2)
)");
  module.save(path);
}

TorchExecutorOptions ScriptedOptions(const ModelConfig& config, const std::string& dir) {
  TorchExecutorOptions options;
  options.model = config;
  options.stage_modules = dir;
  return options;
}

void SaveStages(const std::string& dir, int stages, const ModelConfig& config) {
  for (int s = 0; s < stages; ++s) {
    SaveMlpStage(ScriptedStagePath(dir, s), config.hidden, 100 + s, config.hidden);
  }
}

struct ScriptedCase {
  std::string strategy;
  int stages_per_rank = 1;
  bool gloo = false;
};

class ScriptedStages : public ::testing::TestWithParam<ScriptedCase> {};

TEST_P(ScriptedStages, MatchTheSameModulesRunInSequence) {
  const ScriptedCase& c = GetParam();
  PlanRequest request;
  request.strategy = c.strategy;
  request.topology.ranks = 2;
  request.topology.stages_per_rank = c.stages_per_rank;
  request.topology.microbatches = 4;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Under dual placement both copies of a model stage load its one module.
  const StageMap map(plan->request.topology);
  const int model_stages = map.num_stages() / map.chains();
  const ModelConfig config = DataShape();
  const TempDir dir("scripted");
  ASSERT_FALSE(dir.path().empty());
  SaveStages(dir.path(), model_stages, config);

  std::vector<std::unique_ptr<ScriptedStage>> modules;
  std::vector<const StageModule*> stages;
  for (int s = 0; s < model_stages; ++s) {
    auto loaded = ScriptedStage::Load(ScriptedStagePath(dir.path(), s), s, at::kCPU);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    modules.push_back(std::move(*loaded));
    stages.push_back(modules.back().get());
  }
  const StepResult want =
      OnEveryStage(map, Reference(stages, config, request.topology.microbatches));

  StepResult got;
  if (c.gloo) {
    std::vector<std::string> flags = ModelFlags(config);
    flags.insert(flags.end(), {"--stage-modules", dir.path()});
    got = RunOverGloo(*plan, flags, "scripted-gloo");
  } else {
    got = RunInProcess(*plan, ScriptedOptions(config, dir.path()));
  }
  ExpectMatches(got, want);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ScriptedStages,
                         ::testing::Values(ScriptedCase{"1f1b"}, ScriptedCase{"zb-h1"},
                                           ScriptedCase{"zbv", 2}, ScriptedCase{"dualpipe-v", 2},
                                           ScriptedCase{"dualpipe", 2},
                                           ScriptedCase{"zb-h1", 1, true}),
                         [](const ::testing::TestParamInfo<ScriptedCase>& param) {
                           std::string name =
                               param.param.strategy + (param.param.gloo ? "_gloo" : "_inproc");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(ScriptedStage, TrainsParametersButNotBuffers) {
  const TempDir dir("scripted-params");
  SaveMlpStage(ScriptedStagePath(dir.path(), 0), 16, 1, 16);
  const auto stage = ScriptedStage::Load(ScriptedStagePath(dir.path(), 0), 0, at::kCPU);
  ASSERT_TRUE(stage.ok()) << stage.status().message();
  EXPECT_EQ((*stage)->parameter_names(), (std::vector<std::string>{"w1", "b1", "w2", "b2"}));
  EXPECT_EQ((*stage)->split(), BackwardSplit::kGraphCut);
}

TEST(ScriptedStage, MissingModuleIsAnErrorNamingTheFile) {
  const TempDir dir("scripted-missing");
  SaveMlpStage(ScriptedStagePath(dir.path(), 0), 16, 1, 16);  // stage 1's file is missing
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 2;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok());
  const auto executor =
      TorchExecutor::Create(*plan, RankId(1), ScriptedOptions(DataShape(), dir.path()));
  ASSERT_FALSE(executor.ok());
  EXPECT_NE(executor.status().message().find("stage 1"), std::string::npos)
      << executor.status().message();
  EXPECT_NE(executor.status().message().find(ScriptedStagePath(dir.path(), 1)), std::string::npos)
      << executor.status().message();
}

TEST(ScriptedStage, OutputOfTheWrongShapeFailsTheForwardNamingBothShapes) {
  const TempDir dir("scripted-shape");
  const ModelConfig config = DataShape();
  SaveMlpStage(ScriptedStagePath(dir.path(), 0), config.hidden, 1, config.hidden / 2);
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 1;
  request.topology.microbatches = 1;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok());
  auto executor = TorchExecutor::Create(*plan, RankId(0), ScriptedOptions(config, dir.path()));
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  ASSERT_TRUE((*executor)->BeginStep({}).ok());
  const Action& forward = plan->programs.front().actions.front();
  ASSERT_EQ(forward.kind, ActionKind::kForward);
  const Status status = (*executor)->Run(forward, runtime::OpContext{});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("produced shape [2, 8, 8]"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("must be [2, 8, 16]"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace pipeplan::torch_ext
