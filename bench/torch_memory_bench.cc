// What counting memory costs a measured step on the built-in model (CPU, one intra-op thread):
// one rank of 1f1b with 8 microbatches (P=1: F and B, 8 each), hidden 256, sequence 64, run
// through the executor's own Run with memory counted (the counting allocator in place, a
// meter read around every op) and without (the plain allocator, no meter). The two alternate
// step by step, and which goes first alternates too, so that the VM's drift and the caches
// treat both alike; the figure is the median counted step over the median uncounted one.
//
// Budget (issue 20): counting adds at most 2% to a step (counter "ratio" <= 1.02).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <vector>

#include "pipeplan/torch_ext/memory_meter.h"
#include "torch_single_stage.h"

namespace pipeplan::torch_ext {
namespace {

constexpr double kBudgetRatio = 1.02;

using Clock = std::chrono::steady_clock;

StatusOr<double> TimedStep(SingleStage& single, int step, bool counted) {
  PIPEPLAN_RETURN_IF_ERROR(UseCountingAllocator(counted));
  const auto start = Clock::now();
  PIPEPLAN_RETURN_IF_ERROR(RunStep(single, step));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void BM_Budget_MemoryCountingOverhead(benchmark::State& state) {
  at::set_num_threads(1);
  TorchExecutorOptions options;
  options.model.hidden = 256;
  options.model.sequence = 64;
  StatusOr<SingleStage> counted = MakeSingleStage("1f1b", 8, options);
  options.count_memory = false;
  StatusOr<SingleStage> plain = MakeSingleStage("1f1b", 8, options);
  if (!counted.ok() || !plain.ok()) {
    state.SkipWithError((counted.ok() ? plain.status() : counted.status()).message().c_str());
    return;
  }
  std::vector<double> with, without;
  int step = 0;
  for (auto _ : state) {
    // Which goes first alternates, so that neither always finds the other's caches.
    const bool plain_first = step % 2 == 0;
    StatusOr<double> first =
        plain_first ? TimedStep(*plain, step, false) : TimedStep(*counted, step, true);
    StatusOr<double> second = !first.ok()   ? first
                              : plain_first ? TimedStep(*counted, step, true)
                                            : TimedStep(*plain, step, false);
    if (!second.ok()) {
      state.SkipWithError(second.status().message().c_str());
      return;
    }
    const double a = plain_first ? *first : *second;
    const double b = plain_first ? *second : *first;
    without.push_back(a);
    with.push_back(b);
    ++step;
    state.SetIterationTime(a + b);
  }
  if (with.empty()) {
    state.SkipWithError("no step ran");
    return;
  }
  const double ratio = Median(with) / Median(without);
  state.counters["counted_ms"] = 1e3 * Median(with);
  state.counters["plain_ms"] = 1e3 * Median(without);
  state.counters["ratio"] = ratio;
  state.counters["budget_ratio"] = kBudgetRatio;
  state.SetLabel(ratio <= kBudgetRatio ? "budget counted <= 1.02 x plain: within budget"
                                       : "budget counted <= 1.02 x plain: OVER BUDGET");
}
BENCHMARK(BM_Budget_MemoryCountingOverhead)
    ->MinTime(5.0)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace pipeplan::torch_ext

BENCHMARK_MAIN();
