// Whole-pipeline cost of planning: BuildAndSimulatePlan (generate, insert comm, validate
// incl. the dry run, simulate), for interleaved-1f1b.
//
// Budget: P=32, V=2, M=256 must plan and simulate in under 10 ms (one CPU core). The
// "ms" counter is the mean wall time per iteration and "budget_ms" the budget; the label
// says "within budget" or "OVER BUDGET". The sweep over P in {8, 32, 128} and M in
// {64, 256, 1024, 2048} (V=2) shows how the cost grows with the number of actions
// (2 * P * V * M compute actions plus their comm); it has no budget.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/planner/planner.h"
#include "unit_costs.h"

namespace pipeplan {
namespace {

constexpr double kBudgetMs = 10.0;

PlanRequest InterleavedRequest(int ranks, int microbatches) {
  PlanRequest request;
  request.strategy = "interleaved-1f1b";
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = 2;
  request.topology.microbatches = microbatches;
  request.topology.placement = Placement::kLoop;
  request.costs = bench::UnitCosts();
  return request;
}

// Runs BuildAndSimulatePlan per iteration; returns the total wall time in milliseconds, or a
// negative value after reporting an error through `state`.
double RunPipeline(benchmark::State& state, const PlanRequest& request) {
  double total_ms = 0;
  size_t actions = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<Evaluated> planned = BuildAndSimulatePlan(request);
    if (!planned.ok()) {
      state.SkipWithError(planned.status().message().c_str());
      return -1;
    }
    benchmark::DoNotOptimize(planned->timeline.metrics.makespan);
    total_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    actions = 0;
    for (const RankProgram& program : planned->plan.programs) actions += program.actions.size();
  }
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["ms"] = benchmark::Counter(total_ms, benchmark::Counter::kAvgIterations);
  return total_ms;
}

// The budgeted case: interleaved-1f1b, P=32, V=2, M=256.
void BM_Budget_Interleaved1F1B_P32_V2_M256(benchmark::State& state) {
  const double total_ms = RunPipeline(state, InterleavedRequest(32, 256));
  if (total_ms < 0 || state.iterations() == 0) return;
  const double mean_ms = total_ms / static_cast<double>(state.iterations());
  state.counters["budget_ms"] = kBudgetMs;
  state.SetLabel(mean_ms <= kBudgetMs ? "budget 10 ms: within budget"
                                      : "budget 10 ms: OVER BUDGET");
}
BENCHMARK(BM_Budget_Interleaved1F1B_P32_V2_M256)->Unit(benchmark::kMillisecond)->UseRealTime();

// Scaling sweep, no budget. interleaved-1f1b needs M >= P (microbatch group size P), so the
// P=128, M=64 point is left out.
void BM_Sweep_Interleaved1F1B_V2(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int microbatches = static_cast<int>(state.range(1));
  RunPipeline(state, InterleavedRequest(ranks, microbatches));
}
void SweepArgs(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"P", "M"});
  for (const int ranks : {8, 32, 128}) {
    for (const int microbatches : {64, 256, 1024, 2048}) {
      if (microbatches >= ranks) bench->Args({ranks, microbatches});
    }
  }
}
BENCHMARK(BM_Sweep_Interleaved1F1B_V2)
    ->Apply(SweepArgs)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
