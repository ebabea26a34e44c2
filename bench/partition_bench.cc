// Partition: the split, strategy and V chosen together for a 64-layer model.
//
// Budget (this machine's 2 cores; issue 53):
//   64 layers onto P=8, V=2, M=32, across the catalogue (every strategy taking V=2)   10 s
// The model: an embedding (F 2, I 2, W 2 ms), 62 blocks of widths 1, 1.5 or 2 (F = I = W =
// 3 x width ms, activation 400 MB x width, parameters 400 MB x width) in a fixed pseudo-random
// order, and a head (F = I = W = 12 ms, activation 3 GB, parameters 2 GB); outputs 16 MB,
// Adam's multiple 3, comm 0.1 ms, no limit. The "s" counter is the mean wall time per
// iteration and "budget_s" the budget; the label says "within budget" or "OVER BUDGET" and how
// many plans the search simulated.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "pipeplan/planner/partition.h"

namespace pipeplan {
namespace {

LayerCosts SixtyFourLayers() {
  LayerCosts model;
  model.time_unit = "ms";
  model.optimizer_multiple = 3;
  const auto layer = [](std::string name, double time, double activation, double parameters) {
    return LayerFigures{.name = std::move(name),
                        .forward = time,
                        .backward = std::nullopt,
                        .backward_input = time,
                        .backward_weight = time,
                        .activation = activation,
                        .freed_by_input = 0,
                        .parameter_bytes = parameters,
                        .output_bytes = 16e6};
  };
  model.layers.push_back(layer("tok_embeddings", 2, 2e8, 5e8));
  unsigned state = 12345;  // a fixed linear congruential sequence: the same model every run
  for (int i = 0; i < 62; ++i) {
    state = state * 1103515245u + 12345u;
    const double widths[] = {1.0, 1.0, 1.5, 2.0};
    const double width = widths[(state >> 16) % 4];
    model.layers.push_back(
        layer("layers." + std::to_string(i), 3 * width, 4e8 * width, 4e8 * width));
  }
  model.layers.push_back(layer("output", 12, 3e9, 2e9));
  return model;
}

void BM_Budget_Partition_L64_P8_V2_M32(benchmark::State& state) {
  const PartitionRequest request{.layers = SixtyFourLayers(),
                                 .ranks = 8,
                                 .microbatches = 32,
                                 .strategy = "auto",
                                 .stages_per_rank = 2,
                                 .memory_limits = {},
                                 .link = {.latency = 0.1, .bandwidth = 0},
                                 .runtime = Runtime::kAny,
                                 .enumerate_up_to = 2000};
  double total_s = 0;
  int plans = 0;
  std::string picked;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<PartitionResult> result = Partition(request);
    const auto end = std::chrono::steady_clock::now();
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    total_s += std::chrono::duration<double>(end - start).count();
    plans = result->evaluations;
    picked = result->best.planned.plan.request.strategy;
  }
  const double mean_s = total_s / static_cast<double>(state.iterations());
  state.counters["s"] = mean_s;
  state.counters["budget_s"] = 10.0;
  state.counters["plans"] = plans;
  state.SetLabel("budget 10 s: " + std::string(mean_s <= 10.0 ? "within budget" : "OVER BUDGET") +
                 "; picked " + picked);
}
BENCHMARK(BM_Budget_Partition_L64_P8_V2_M32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
