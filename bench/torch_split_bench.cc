// The I/W split on the built-in model (CPU, one intra-op thread): how much does splitting a
// backward into I (input gradients, weight GEMMs stashed) and W (the stashed GEMMs) cost
// over one full backward B? Zero-bubble schedules assume I + W ~ B; the split is only worth
// having when that holds.
//
// Budget: I + W <= 1.15 x B (counter "ratio"). Each iteration runs, on one single-stage
// TorchExecutor per path, F then B (plan 1f1b, P=1, M=1) and F then I then W (plan zb-h1,
// P=1, M=1), through the executor's own Run so the figure is what a pipeline rank pays.
// Only B, I and W are timed (steady clock); the figure is the median over iterations, so a
// stolen time slice on a shared VM moves it little. Printed for the default model and a
// wider one (hidden 256, sequence 64), where the GEMMs dominate, and for a user's TorchScript
// stage of that width (scripted=1: a residual MLP, h -> 4h -> h), whose split cuts the graph
// (graph_cut.h) instead of deferring GEMMs.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/script.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/torch_ext/scripted_stage.h"
#include "torch_single_stage.h"

namespace pipeplan::torch_ext {
namespace {

constexpr double kBudgetRatio = 1.15;

using Clock = std::chrono::steady_clock;

// Runs one step of `single`, collecting the seconds of each B, I and W (F is not timed).
Status TimeStep(SingleStage& single, int step, std::vector<double>& b, std::vector<double>& i,
                std::vector<double>& w) {
  runtime::OpContext context;
  context.step = step;
  PIPEPLAN_RETURN_IF_ERROR(single.executor->BeginStep(context));
  for (size_t index = 0; index < single.compute.size(); ++index) {
    const Action& action = single.compute[index];
    context.action_index = index;
    const auto start = Clock::now();
    PIPEPLAN_RETURN_IF_ERROR(single.executor->Run(action, context));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (action.kind == ActionKind::kBackward) b.push_back(seconds);
    if (action.kind == ActionKind::kBackwardInput) i.push_back(seconds);
    if (action.kind == ActionKind::kBackwardWeight) w.push_back(seconds);
  }
  return single.executor->EndStep(context);
}

// Writes a residual MLP stage x + tanh(x W1^T + b1) W2^T + b2 (hidden -> 4 hidden -> hidden)
// as DIR/stage-0.pt in a new temporary DIR, and returns DIR ("" on failure).
std::string SaveMlpStage(int hidden) {
  std::string dir = "/tmp/pipeplan-split-bench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  torch::jit::Module module("MlpStage");
  const auto parameter = [&](const char* name, const at::Tensor& value) {
    module.register_parameter(name, value.requires_grad_(true), /*is_buffer=*/false);
  };
  parameter("w1", at::randn({4 * hidden, hidden}, gen) * 0.05);
  parameter("b1", at::zeros({4 * hidden}));
  parameter("w2", at::randn({hidden, 4 * hidden}, gen) * 0.05);
  parameter("b2", at::zeros({hidden}));
  module.define(R"(
def forward(self, x):
    h = torch.tanh(torch.matmul(x, self.w1.t()) + self.b1)
    return x + torch.matmul(h, self.w2.t()) + self.b2
)");
  module.save(ScriptedStagePath(dir, 0));
  return dir;
}

void BM_Budget_SplitBackwardOverFullBackward(benchmark::State& state) {
  at::set_num_threads(1);
  ModelConfig model;
  model.hidden = static_cast<int>(state.range(0));
  model.sequence = static_cast<int>(state.range(1));
  TorchExecutorOptions options;
  options.model = model;
  if (state.range(2) != 0) {
    options.stage_modules = SaveMlpStage(model.hidden);
    if (options.stage_modules.empty()) {
      state.SkipWithError("cannot create a temporary directory for the TorchScript stage");
      return;
    }
  }
  StatusOr<SingleStage> full = MakeSingleStage("1f1b", 1, options);
  StatusOr<SingleStage> split = MakeSingleStage("zb-h1", 1, options);
  if (!options.stage_modules.empty()) {  // loaded by both executors: the files can go
    unlink(ScriptedStagePath(options.stage_modules, 0).c_str());
    rmdir(options.stage_modules.c_str());
  }
  if (!full.ok() || !split.ok()) {
    state.SkipWithError((full.ok() ? split.status() : full.status()).message().c_str());
    return;
  }

  std::vector<double> b, i, w;
  int step = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    Status status = TimeStep(*full, step, b, i, w);
    if (status.ok()) status = TimeStep(*split, step, b, i, w);
    if (!status.ok()) {
      state.SkipWithError(status.message().c_str());
      return;
    }
    ++step;
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  if (b.size() != i.size() || i.size() != w.size() || b.empty()) {
    state.SkipWithError("the plans did not run one B and one I + W per iteration");
    return;
  }
  const double b_ms = 1e3 * Median(b);
  const double i_ms = 1e3 * Median(i);
  const double w_ms = 1e3 * Median(w);
  const double ratio = (i_ms + w_ms) / b_ms;
  state.counters["B_ms"] = b_ms;
  state.counters["I_ms"] = i_ms;
  state.counters["W_ms"] = w_ms;
  state.counters["ratio"] = ratio;
  state.counters["budget_ratio"] = kBudgetRatio;
  state.SetLabel(ratio <= kBudgetRatio ? "budget I+W <= 1.15 B: within budget"
                                       : "budget I+W <= 1.15 B: OVER BUDGET");
}
BENCHMARK(BM_Budget_SplitBackwardOverFullBackward)
    ->ArgNames({"hidden", "sequence", "scripted"})
    ->Args({64, 16, 0})
    ->Args({256, 64, 0})
    ->Args({256, 64, 1})
    ->MinTime(2.0)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace pipeplan::torch_ext

BENCHMARK_MAIN();
