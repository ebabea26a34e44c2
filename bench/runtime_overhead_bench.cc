// Runtime overhead per action: a plan runs in process (ranks as threads, in-process
// transport) with the synthetic executor holding every op for zero time, so what is left is
// the runtime itself: posting and matching transfers, waking the waiting rank, timing every
// action, publishing progress for the watchdog.
//
// Budget: 20 us per action. The figure "us_per_action" is the wall time of one step divided
// by the number of actions of the busiest rank (each rank runs its list in order, so that is
// the per-action cost seen along a rank). Printed for 1f1b at P=4 (M=32) and P=16 (M=64);
// on the 2-core machine 16 rank threads share 2 cores, which the P=16 figure includes.
// Each iteration runs 1 warm-up and 10 measured steps; only the measured steps are timed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/synthetic_run.h"

namespace pipeplan::runtime {
namespace {

constexpr double kBudgetUs = 20.0;
constexpr int kStepsPerIteration = 10;

void BM_Budget_RuntimeOverheadPerAction_1F1B(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int microbatches = static_cast<int>(state.range(1));
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  const StatusOr<Plan> plan = BuildPlan(request);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().message().c_str());
    return;
  }
  size_t busiest = 0;
  for (const RankProgram& program : plan->programs) {
    busiest = std::max(busiest, program.actions.size());
  }

  LocalRunOptions options;
  options.steps = kStepsPerIteration;
  options.warmup = 1;
  double measured_seconds = 0.0;
  options.on_step = [&](const StepReport& report) {
    if (!report.warmup) measured_seconds += report.seconds;
  };

  double total_seconds = 0.0;
  for (auto _ : state) {
    measured_seconds = 0.0;
    const auto steps =
        RunSyntheticInProcess(*plan, SyntheticOptions{.seconds_per_unit = 0.0}, options);
    if (!steps.ok()) {
      state.SkipWithError(steps.status().message().c_str());
      return;
    }
    state.SetIterationTime(measured_seconds / kStepsPerIteration);
    total_seconds += measured_seconds / kStepsPerIteration;
  }
  const double step_us = 1e6 * total_seconds / static_cast<double>(state.iterations());
  const double per_action_us = step_us / static_cast<double>(busiest);
  state.counters["actions_busiest_rank"] = static_cast<double>(busiest);
  state.counters["us_per_action"] = per_action_us;
  state.counters["budget_us"] = kBudgetUs;
  state.SetLabel(per_action_us <= kBudgetUs ? "budget 20 us/action: within budget"
                                            : "budget 20 us/action: OVER BUDGET");
}
BENCHMARK(BM_Budget_RuntimeOverheadPerAction_1F1B)
    ->ArgNames({"P", "M"})
    ->Args({4, 32})
    ->Args({16, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace pipeplan::runtime

BENCHMARK_MAIN();
