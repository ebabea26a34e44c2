// The torch executor against a single-process, non-pipelined reference: for every strategy,
// at 2 and 4 ranks in-process (threads), and for six of them also over Gloo (processes
// spawned by pipeplan-torch), the loss and every parameter gradient of one step match (fp32,
// rtol 1e-5). Under dual placement (dualpipe) both copies of each model stage must hold the
// whole batch's gradient, the sum of the two copies' halves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_check.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/strategy.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "pipeplan/torch_ext/transformer_stage.h"

namespace pipeplan::torch_ext {
namespace {

using testing::ExpectMatches;
using testing::ModelFlags;
using testing::OnEveryStage;
using testing::Reference;
using testing::RunInProcess;
using testing::RunOverGloo;
using testing::StepResult;

struct GradientCase {
  std::string strategy;
  int ranks = 2;
  bool gloo = false;
  int stages_per_rank = 1;
};

class TorchGradients : public ::testing::TestWithParam<GradientCase> {};

TEST_P(TorchGradients, MatchANonPipelinedReference) {
  const GradientCase& c = GetParam();
  PlanRequest request;
  request.strategy = c.strategy;
  request.topology.ranks = c.ranks;
  request.topology.microbatches = 2 * c.ranks;
  request.topology.stages_per_rank = c.stages_per_rank;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ModelConfig config;
  config.layers_per_stage = 1;
  config.hidden = 32;
  config.heads = 4;
  config.sequence = 8;
  config.microbatch_size = 2;
  config.seed = 7;
  const StageMap map(plan->request.topology);
  std::vector<TransformerStage> model;
  std::vector<const StageModule*> stages;
  for (int s = 0; s < map.num_stages() / map.chains(); ++s) model.emplace_back(config, s, at::kCPU);
  for (const TransformerStage& stage : model) stages.push_back(&stage);
  const StepResult want =
      OnEveryStage(map, Reference(stages, config, request.topology.microbatches));
  TorchExecutorOptions options;
  options.model = config;
  const StepResult got =
      c.gloo ? RunOverGloo(*plan, ModelFlags(config), c.strategy) : RunInProcess(*plan, options);
  ExpectMatches(got, want);
}

// Every strategy in-process at its smallest V; six of them over Gloo too.
std::vector<GradientCase> Cases() {
  std::vector<GradientCase> cases;
  for (const Strategy& strategy : AllStrategies()) {
    const std::string name(strategy.name);
    const int v = strategy.min_stages_per_rank;
    const bool gloo = name == "1f1b" || name == "interleaved-1f1b" || name == "zb-h1" ||
                      name == "zbv" || name == "dualpipe-v" || name == "dualpipe";
    for (const int ranks : {2, 4}) {
      cases.push_back({name, ranks, false, v});
      if (gloo) cases.push_back({name, ranks, true, v});
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

// Two model copies on an odd number of ranks would put both copies of the middle stage on
// one rank (no mirror to add its gradients with): refused up front, naming the fix.
TEST(TorchGradientsRefusal, DualPlacementOnAnOddNumberOfRanksIsRefused) {
  Plan plan;
  plan.request.topology = Topology{3, 2, 6, Placement::kDual};
  TorchExecutorOptions options;
  const auto executor = TorchExecutor::Create(plan, RankId(0), options);
  ASSERT_FALSE(executor.ok());
  EXPECT_NE(executor.status().message().find("dual placement on 3 ranks"), std::string::npos)
      << executor.status().message();
  EXPECT_NE(executor.status().message().find("use an even number of ranks"), std::string::npos);
}

}  // namespace
}  // namespace pipeplan::torch_ext
