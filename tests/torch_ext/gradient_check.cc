#include "gradient_check.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/torch_ext/stage_dump.h"
#include "pipeplan/torch_ext/transformer_stage.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext::testing {
namespace {

constexpr double kAtol = 1e-8;

}  // namespace

StepResult Reference(const std::vector<const StageModule*>& stages, const ModelConfig& config,
                     int microbatches) {
  StepResult out;
  out.loss = 0.0;
  for (int mb = 0; mb < microbatches; ++mb) {
    at::Tensor x = MicrobatchInput(config, mb, at::kCPU);
    for (const StageModule* stage : stages) {
      const auto* builtin = dynamic_cast<const TransformerStage*>(stage);
      // The built-in stage's stock-autograd path, so the reference does not share the split.
      x = builtin != nullptr ? builtin->Forward(x, LinearMode::kPlain, nullptr)
                             : stage->Forward(x, nullptr);
    }
    const at::Tensor loss = MicrobatchLoss(x, MicrobatchTarget(config, mb, at::kCPU), microbatches);
    torch::autograd::backward({loss});
    out.loss += loss.item<double>();
  }
  for (const StageModule* stage : stages) {
    for (size_t i = 0; i < stage->parameters().size(); ++i) {
      out.grads[stage->stage()][stage->parameter_names()[i]] =
          stage->parameters()[i].grad().clone();
    }
  }
  return out;
}

StepResult OnEveryStage(const StageMap& map, const StepResult& by_depth) {
  StepResult out{.loss = by_depth.loss, .grads = {}};
  for (int s = 0; s < map.num_stages(); ++s) {
    out.grads[s] = by_depth.grads.at(map.DepthOf(StageId(s)));
  }
  return out;
}

StepResult RunInProcess(const Plan& plan, const TorchExecutorOptions& base) {
  const int ranks = plan.request.topology.ranks;
  StepResult out;
  std::mutex mutex;
  std::vector<std::unique_ptr<TorchExecutor>> executors;
  for (int r = 0; r < ranks; ++r) {
    TorchExecutorOptions options = base;
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

std::vector<std::string> ModelFlags(const ModelConfig& config) {
  return {"--layers-per-stage",
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
          std::to_string(config.seed)};
}

StepResult RunOverGloo(const Plan& plan, const std::vector<std::string>& flags,
                       const std::string& name) {
  const TempDir dir(name);
  const std::string plan_path = dir.path() + "/plan.pb";
  const StatusOr<std::string> bytes = SerializePlan(plan, ProtoFormat::kBinary);
  EXPECT_TRUE(bytes.ok());
  std::ofstream(plan_path, std::ios::binary) << *bytes;
  std::vector<std::string> args = {"run",
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
                                   dir.path() + "/grads"};
  args.insert(args.end(), flags.begin(), flags.end());
  const CommandResult run = RunTorchTool(args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  StepResult out;
  for (int s = 0; s < plan.request.topology.num_stages(); ++s) {
    std::ifstream in(GradientDumpPath(dir.path() + "/grads", s), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    const StatusOr<c10::impl::GenericDict> dump = DecodeStageDump(content.str());
    EXPECT_TRUE(dump.ok()) << "stage " << s << ": " << dump.status().message();
    if (!dump.ok()) continue;
    const double loss = dump->at("loss").toDouble();
    if (!std::isnan(loss)) out.loss = loss;
    for (const auto& g : dump->at("grads").toGenericDict()) {
      out.grads[s][g.key().toStringRef()] = g.value().toTensor();
    }
  }
  return out;
}

void ExpectMatches(const StepResult& got, const StepResult& want, double rtol) {
  EXPECT_NEAR(got.loss, want.loss, rtol * std::abs(want.loss)) << "loss";
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [stage, params] : want.grads) {
    ASSERT_EQ(got.grads.count(stage), 1u) << "stage " << stage;
    const auto& mine = got.grads.at(stage);
    for (const auto& [name, reference] : params) {
      ASSERT_EQ(mine.count(name), 1u) << "stage " << stage << " " << name;
      const at::Tensor& g = mine.at(name);
      EXPECT_TRUE(at::allclose(g, reference, rtol, kAtol))
          << "stage " << stage << " " << name << ": max abs diff "
          << (g - reference).abs().max().item<double>() << ", max abs value "
          << reference.abs().max().item<double>();
    }
  }
}

}  // namespace pipeplan::torch_ext::testing
