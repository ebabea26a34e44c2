// The solver-made strategies (BuildOptimalPlan with OR-Tools CP-SAT, as `pipeplan plan
// --strategy optimal` runs it): how long a proof takes and how close the search gets.
//
// Budgets (this machine's 2 cores; issue 21):
//   optimal-v, P=4, V=2, M=8, unit costs: proven optimal in under 10 s
//   optimal, P=8, V=1, M=24, the Zero Bubble paper's 1.5B costs (F 18522, I 18086, W 9337,
//     comm 601), no memory limit: within 1% of the proven bound in 60 s
// "s" is the wall time of one plan (warm start, solve, comm insertion, validation,
// simulation), "gap_percent" the plan's distance to the solver's proven bound; the label says
// "within budget" or "OVER BUDGET" with the solver's verdict. Skips when OR-Tools is missing
// (scripts/setup_solver.sh).
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "cp_sat_solver.h"
#include "pipeplan/planner/optimal.h"

namespace pipeplan {
namespace {

PlanRequest Request(const std::string& strategy, int ranks, int stages_per_rank, int microbatches,
                    double forward, double input, double weight, double comm) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = microbatches;
  request.costs.stages = {StageCosts{forward, input + weight, input, weight, 0}};
  request.costs.boundaries = {BoundaryCosts{comm, 0, 0, 0}};
  return request;
}

// Plans once (the solver is deterministic, so one iteration is the figure) and labels it
// against the budget: within `budget_s` seconds and at most `budget_gap` from the bound.
void RunOptimal(benchmark::State& state, const PlanRequest& request, double time_limit_s,
                double budget_s, double budget_gap, const std::string& budget_text) {
  OptimalOptions options;
  options.time_limit_s = time_limit_s;
  double seconds = 0;
  StatusOr<OptimalPlan> result = Internal("not run");
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    result = BuildOptimalPlan(request, options, cli::RunCpSat);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!result.ok()) {
    state.SkipWithError(result.status().message().c_str());
    return;
  }
  const double makespan = result->timeline.metrics.makespan;
  const double bound = result->plan.provenance.proven_bound;
  const double gap = bound > 0 ? makespan / bound - 1 : 1.0;
  state.counters["s"] = seconds;
  state.counters["budget_s"] = budget_s;
  state.counters["makespan"] = makespan;
  state.counters["best_heuristic"] = result->best_heuristic_makespan;
  state.counters["gap_percent"] = gap * 100;
  const bool within = seconds <= budget_s && gap <= budget_gap;
  state.SetLabel("budget " + budget_text + ": " + (within ? "within budget" : "OVER BUDGET") +
                 "; " + result->plan.provenance.solver_status);
}

void BM_Budget_OptimalV_P4_V2_M8_Unit(benchmark::State& state) {
  RunOptimal(state, Request("optimal-v", 4, 2, 8, 1, 1, 1, 0), 60, 10, 0, "proven in 10 s");
}
BENCHMARK(BM_Budget_OptimalV_P4_V2_M8_Unit)->Iterations(1)->Unit(benchmark::kSecond);

void BM_Budget_Optimal_P8_M24_Paper(benchmark::State& state) {
  // 45 deterministic seconds: about 50 s of wall time here.
  RunOptimal(state, Request("optimal", 8, 1, 24, 18522, 18086, 9337, 601), 45, 60, 0.01,
             "1% of the bound in 60 s");
}
BENCHMARK(BM_Budget_Optimal_P8_M24_Paper)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
