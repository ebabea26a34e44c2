// Post-validation against the synchronous global check, with steps that follow each other
// without a barrier (LocalRunOptions::step_barrier = false) and with it, on the synthetic executor
// (every op held for its modelled time) and the in-process transport.
//
// zbv at P=4, M=8, unit costs (F 1, B 2 split as I 1 + W 1, no transfer time): every rank
// works 48 units a step; the simulated step ends at 51 (rank r starts at r and ends at
// 48 + r). The optimizer's global check (clipping's norm, the non-finite skip) costs 2 units
// (SyntheticOptions::check_units, an all-reduce's latency). Derived, per step:
//   synchronous: every rank waits for the all-to-all exchange at the step's end (unit 51)
//                and then for the check: 51 + 2 = 53 units;
//   post-validation: the update is speculative, no rank waits for the check or for the
//                ranks behind it, so each works on: its 48 units.
// The check's exposed time, 5 units a step, is what post-validation saves. With the barrier
// (the rows barrier:1) both wait for the last rank: 53 and 51 units, post-validation saving
// only the check. Budget: each median period within 3% of its derived figure. The figures are the
// median over 5 runs of each run's median over 20 steps (1 ms per unit), and the spread of the 5
// run medians.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/synthetic_run.h"

namespace pipeplan::runtime {
namespace {

constexpr double kSecondsPerUnit = 1e-3;
constexpr double kCheckUnits = 2.0;
constexpr int kSteps = 20;
constexpr double kBudget = 0.03;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void BM_Budget_PostValidationWithoutStepBarrier(benchmark::State& state) {
  const bool post_validation = state.range(0) != 0;
  const bool barrier = state.range(1) != 0;
  PlanRequest request;
  request.strategy = "zbv";
  request.topology.ranks = 4;
  request.topology.stages_per_rank = 2;
  request.topology.microbatches = 8;
  request.options.post_validation = post_validation;
  const StatusOr<Plan> plan = BuildPlan(request);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().message().c_str());
    return;
  }
  LocalRunOptions options;
  options.steps = kSteps;
  options.warmup = 1;
  options.step_barrier = barrier;
  std::vector<double> periods;  // this run's, in units
  options.on_step = [&](const StepReport& report) {
    if (!report.warmup) periods.push_back(report.seconds / kSecondsPerUnit);
  };
  std::vector<double> runs;  // each run's median period, in units
  for (auto _ : state) {
    periods.clear();
    const auto steps = RunSyntheticInProcess(
        *plan, {.seconds_per_unit = kSecondsPerUnit, .check_units = kCheckUnits}, options);
    if (!steps.ok()) {
      state.SkipWithError(steps.status().message().c_str());
      return;
    }
    runs.push_back(Median(periods));
    state.SetIterationTime(runs.back() * kSecondsPerUnit);
  }
  const double derived = post_validation ? (barrier ? 51.0 : 48.0) : 51.0 + kCheckUnits;
  const double measured = Median(runs);
  const double error = measured / derived - 1.0;
  state.counters["period_units"] = measured;
  state.counters["derived_units"] = derived;
  state.counters["spread_units"] =
      *std::max_element(runs.begin(), runs.end()) - *std::min_element(runs.begin(), runs.end());
  state.counters["error_percent"] = 100.0 * error;
  state.SetLabel(std::string(post_validation ? "post-validation" : "synchronous") +
                 (std::abs(error) <= kBudget ? ": within 3% of derived" : ": OVER BUDGET"));
}
BENCHMARK(BM_Budget_PostValidationWithoutStepBarrier)
    ->ArgNames({"pv", "barrier"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace pipeplan::runtime

BENCHMARK_MAIN();
