// The torch executor against a single-process, non-pipelined reference: for each strategy,
// 2 and 4 ranks, in-process (threads) and over Gloo (processes spawned by pipeplan-torch),
// the loss and every parameter gradient of one step match (fp32, rtol 1e-5).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_check.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/torch_ext/transformer_stage.h"

namespace pipeplan::torch_ext {
namespace {

using testing::ExpectMatches;
using testing::ModelFlags;
using testing::Reference;
using testing::RunInProcess;
using testing::RunOverGloo;
using testing::StepResult;

struct GradientCase {
  std::string strategy;
  int ranks = 2;
  bool gloo = false;
};

class TorchGradients : public ::testing::TestWithParam<GradientCase> {};

TEST_P(TorchGradients, MatchANonPipelinedReference) {
  const GradientCase& c = GetParam();
  PlanRequest request;
  request.strategy = c.strategy;
  request.topology.ranks = c.ranks;
  request.topology.microbatches = 2 * c.ranks;
  const bool two_chunks = c.strategy != "1f1b" && c.strategy != "zb-h1";
  request.topology.stages_per_rank = two_chunks ? 2 : 1;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ModelConfig config;
  config.layers_per_stage = 1;
  config.hidden = 32;
  config.heads = 4;
  config.sequence = 8;
  config.microbatch_size = 2;
  config.seed = 7;
  std::vector<TransformerStage> model;
  std::vector<const StageModule*> stages;
  for (int s = 0; s < plan->request.topology.num_stages(); ++s) {
    model.emplace_back(config, s, at::kCPU);
  }
  for (const TransformerStage& stage : model) stages.push_back(&stage);
  const StepResult want = Reference(stages, config, request.topology.microbatches);
  TorchExecutorOptions options;
  options.model = config;
  const StepResult got =
      c.gloo ? RunOverGloo(*plan, ModelFlags(config), c.strategy) : RunInProcess(*plan, options);
  ExpectMatches(got, want);
}

std::vector<GradientCase> Cases() {
  std::vector<GradientCase> cases;
  for (const char* strategy : {"1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipe-v"}) {
    for (const int ranks : {2, 4}) {
      for (const bool gloo : {false, true}) cases.push_back({strategy, ranks, gloo});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, TorchGradients, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<GradientCase>& param) {
                           const GradientCase& c = param.param;
                           std::string name = c.strategy + "_P" + std::to_string(c.ranks) +
                                              (c.gloo ? "_gloo" : "_inproc");
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pipeplan::torch_ext
