// The torch executor against a single-process, non-pipelined reference: for each strategy,
// 2 and 4 ranks, in-process (threads) and over Gloo (processes spawned by pipeplan-torch),
// the loss and every parameter gradient of one step match (fp32, rtol 1e-5).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/proto_io.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/torch_ext/gradient_dump.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-8;

// What one step produced: loss and per-stage gradients, by parameter name.
struct StepResult {
  double loss = std::nan("");
  std::map<int, std::map<std::string, at::Tensor>> grads;
};

StepResult Reference(const ModelConfig& config, int stages, int microbatches) {
  std::vector<TransformerStage> model;
  for (int s = 0; s < stages; ++s) model.emplace_back(config, s, at::kCPU);
  StepResult out;
  out.loss = 0.0;
  for (int mb = 0; mb < microbatches; ++mb) {
    at::Tensor x = MicrobatchInput(config, mb, at::kCPU);
    for (const TransformerStage& stage : model) x = stage.Forward(x, LinearMode::kPlain, nullptr);
    const at::Tensor loss = MicrobatchLoss(x, MicrobatchTarget(config, mb, at::kCPU), microbatches);
    torch::autograd::backward({loss});
    out.loss += loss.item<double>();
  }
  for (const TransformerStage& stage : model) {
    for (size_t i = 0; i < stage.parameters().size(); ++i) {
      out.grads[stage.stage()][stage.parameter_names()[i]] = stage.parameters()[i].grad().clone();
    }
  }
  return out;
}

StepResult RunInProcess(const Plan& plan, const ModelConfig& config) {
  const int ranks = plan.request.topology.ranks;
  StepResult out;
  std::mutex mutex;
  std::vector<std::unique_ptr<TorchExecutor>> executors;
  for (int r = 0; r < ranks; ++r) {
    TorchExecutorOptions options;
    options.model = config;
    options.on_gradients = [&](int, double loss, const std::vector<StageGradients>& stages) {
      const std::lock_guard lock(mutex);
      if (!std::isnan(loss)) out.loss = loss;
      for (const StageGradients& s : stages) {
        for (size_t i = 0; i < s.grads.size(); ++i) out.grads[s.stage][(*s.names)[i]] = s.grads[i];
      }
      return Status::Ok();
    };
    StatusOr<std::unique_ptr<TorchExecutor>> executor =
        TorchExecutor::Create(plan, RankId(r), options);
    EXPECT_TRUE(executor.ok()) << executor.status().message();
    if (!executor.ok()) return out;
    executors.push_back(std::move(*executor));
  }
  const auto transports = runtime::MakeInProcTransports(ranks);
  std::vector<runtime::OpExecutor*> e;
  std::vector<runtime::Transport*> t;
  for (int r = 0; r < ranks; ++r) {
    e.push_back(executors[r].get());
    t.push_back(transports[r].get());
  }
  runtime::LocalRunOptions options;
  options.steps = 1;
  options.warmup = 0;
  options.timeout_seconds = 60;
  const auto run = runtime::RunLocal(plan, e, t, options);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return out;
}

StepResult RunOverGloo(const Plan& plan, const ModelConfig& config, const std::string& name) {
  const testing::TempDir dir(name);
  const std::string plan_path = dir.path() + "/plan.pb";
  const StatusOr<std::string> bytes = SerializePlan(plan, ProtoFormat::kBinary);
  EXPECT_TRUE(bytes.ok());
  std::ofstream(plan_path, std::ios::binary) << *bytes;
  const testing::CommandResult run =
      testing::RunTorchTool({"run",
                             "--plan",
                             plan_path,
                             "--local-ranks",
                             std::to_string(plan.request.topology.ranks),
                             "--steps",
                             "1",
                             "--warmup",
                             "0",
                             "--timeout",
                             "60",
                             "--dump-grads",
                             dir.path() + "/grads",
                             "--layers-per-stage",
                             std::to_string(config.layers_per_stage),
                             "--hidden",
                             std::to_string(config.hidden),
                             "--heads",
                             std::to_string(config.heads),
                             "--sequence",
                             std::to_string(config.sequence),
                             "--microbatch-size",
                             std::to_string(config.microbatch_size),
                             "--seed",
                             std::to_string(config.seed)});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  StepResult out;
  for (int s = 0; s < plan.request.topology.num_stages(); ++s) {
    std::ifstream in(dir.path() + "/grads/" + GradientDumpName(s), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    const StatusOr<GradientDump> dump = DecodeGradientDump(content.str());
    EXPECT_TRUE(dump.ok()) << "stage " << s << ": " << dump.status().message();
    if (!dump.ok()) continue;
    if (!std::isnan(dump->loss)) out.loss = dump->loss;
    for (const NamedValues& g : dump->gradients) {
      out.grads[s][g.name] = at::tensor(g.values).reshape(g.shape);
    }
  }
  return out;
}

void ExpectMatches(const StepResult& got, const StepResult& want) {
  EXPECT_NEAR(got.loss, want.loss, kRtol * std::abs(want.loss)) << "loss";
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [stage, params] : want.grads) {
    ASSERT_EQ(got.grads.count(stage), 1u) << "stage " << stage;
    const auto& mine = got.grads.at(stage);
    for (const auto& [name, reference] : params) {
      ASSERT_EQ(mine.count(name), 1u) << "stage " << stage << " " << name;
      const at::Tensor& g = mine.at(name);
      EXPECT_TRUE(at::allclose(g, reference, kRtol, kAtol))
          << "stage " << stage << " " << name << ": max abs diff "
          << (g - reference).abs().max().item<double>() << ", max abs value "
          << reference.abs().max().item<double>();
    }
  }
}

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
  const StepResult want =
      Reference(config, plan->request.topology.num_stages(), request.topology.microbatches);
  const StepResult got =
      c.gloo ? RunOverGloo(*plan, config, c.strategy) : RunInProcess(*plan, config);
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
