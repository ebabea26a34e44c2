// The solver-made strategies (BuildOptimalPlan with OR-Tools CP-SAT, as `pipeplan plan
// --strategy optimal` runs it): how long a proof takes and how close the search gets.
//
// Budgets (this machine's 2 cores; issue 21):
//   optimal-v, P=4, V=2, M=8, unit costs: proven optimal in under 10 s
//   optimal, P=8, V=1, M=24, the Zero Bubble paper's 1.5B costs (F 18522, I 18086, W 9337,
//     comm 601), no memory limit: within 1% of the proven bound in 60 s
//   P=8, M=256 (periodic: one steady-state period solved, repeated), memory limited to half
//     of 1F1B's: a plan of the solver's own, in seconds, far faster than the heuristics
//   optimal, P=4, M=8, measured costs and memory in bytes (examples/calibrated_costs.textproto)
//     under a 24 MB limit, 5 deterministic seconds: no slower than the best heuristic, in 20 s
//     of wall time (with the LP relaxation it took several times that: docs/benchmarks.md)
// "s" is the wall time of one plan (warm start, solve, comm insertion, validation,
// simulation), "gap_percent" the plan's distance to the solver's proven bound; the label says
// "within budget" or "OVER BUDGET" with the solver's verdict. Skips when OR-Tools is missing
// (scripts/setup_solver.sh).
#include <benchmark/benchmark.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/request_flags.h"
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

// Plans once (the solver is deterministic, so one iteration is the figure) with
// `time_limit_s` and sets the counters every row has: its wall time "s" beside "budget_s",
// the makespan and the best heuristic's. nullopt (the benchmark skipped with the reason) when
// planning failed.
std::optional<OptimalPlan> PlanOnce(benchmark::State& state, const PlanRequest& request,
                                    double time_limit_s, double budget_s, double& seconds) {
  OptimalOptions options;
  options.time_limit_s = time_limit_s;
  StatusOr<OptimalPlan> result = Internal("not run");
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    result = BuildOptimalPlan(request, options, app::RunCpSat);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (!result.ok()) {
    state.SkipWithError(result.status().message().c_str());
    return std::nullopt;
  }
  state.counters["s"] = seconds;
  state.counters["budget_s"] = budget_s;
  state.counters["makespan"] = result->timeline.metrics.makespan;
  state.counters["best_heuristic"] = result->best_heuristic_makespan;
  return *std::move(result);
}

void Label(benchmark::State& state, bool within, const std::string& budget_text,
           const OptimalPlan& result) {
  state.SetLabel("budget " + budget_text + ": " + (within ? "within budget" : "OVER BUDGET") +
                 "; " + result.plan.provenance.solver_status);
}

// Within `budget_s` seconds and at most `budget_gap` from the proven bound.
void RunOptimal(benchmark::State& state, const PlanRequest& request, double time_limit_s,
                double budget_s, double budget_gap, const std::string& budget_text) {
  double seconds = 0;
  const std::optional<OptimalPlan> result =
      PlanOnce(state, request, time_limit_s, budget_s, seconds);
  if (!result.has_value()) return;
  const double bound = result->plan.provenance.proven_bound;
  const double gap = bound > 0 ? result->timeline.metrics.makespan / bound - 1 : 1.0;
  state.counters["gap_percent"] = gap * 100;
  Label(state, seconds <= budget_s && gap <= budget_gap, budget_text, *result);
}

// A periodic solve (M over the whole-step cap) under a memory limit: within `budget_s`
// seconds, a plan of the solver's own and at least `budget_speedup` times as fast as the best
// heuristic of the catalogue ("speedup" = heuristic / solver makespan).
void RunPeriodic(benchmark::State& state, PlanRequest request, double limit, double time_limit_s,
                 double budget_s, double budget_speedup, const std::string& budget_text) {
  request.memory.limit = limit;
  double seconds = 0;
  const std::optional<OptimalPlan> result =
      PlanOnce(state, request, time_limit_s, budget_s, seconds);
  if (!result.has_value()) return;
  const double speedup = result->best_heuristic_makespan / result->timeline.metrics.makespan;
  state.counters["period"] = result->period;
  state.counters["speedup"] = speedup;
  Label(state, seconds <= budget_s && result->solver_improved && speedup >= budget_speedup,
        budget_text, *result);
}

// Within `budget_s` seconds and no slower than the best heuristic: for measured costs, whose
// rounded figures give the solver no proven bound to be judged against.
void RunMeasured(benchmark::State& state, const PlanRequest& request, double time_limit_s,
                 double budget_s, const std::string& budget_text) {
  double seconds = 0;
  const std::optional<OptimalPlan> result =
      PlanOnce(state, request, time_limit_s, budget_s, seconds);
  if (!result.has_value()) return;
  Label(state,
        seconds <= budget_s && result->timeline.metrics.makespan <= result->best_heuristic_makespan,
        budget_text, *result);
}

// The request with the costs and memory model of a cost file of examples/, read as
// `pipeplan plan --costs FILE` reads it.
StatusOr<PlanRequest> WithCostFile(PlanRequest request, const std::string& name) {
  app::CostFlags flags;
  flags.costs_file = std::string(PIPEPLAN_EXAMPLES_DIR) + "/" + name;
  PIPEPLAN_ASSIGN_OR_RETURN(request.costs, app::LoadCosts(flags));
  if (request.costs.memory.has_value()) {
    request.memory = *std::move(request.costs.memory);
    request.costs.memory.reset();
  }
  return request;
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

void BM_Budget_Periodic_P8_M256_Unit_Limit4(benchmark::State& state) {
  RunPeriodic(state, Request("optimal", 8, 1, 256, 1, 1, 1, 0), 4, 10, 15, 1.9,
              "solver-made, 1.9x zb, in 15 s");
}
BENCHMARK(BM_Budget_Periodic_P8_M256_Unit_Limit4)->Iterations(1)->Unit(benchmark::kSecond);

void BM_Budget_Periodic_P8_M256_Paper_Limit4(benchmark::State& state) {
  RunPeriodic(state, Request("optimal", 8, 1, 256, 18522, 18086, 9337, 601), 4, 10, 60, 2.0,
              "solver-made, 2x zb, in 60 s");
}
BENCHMARK(BM_Budget_Periodic_P8_M256_Paper_Limit4)->Iterations(1)->Unit(benchmark::kSecond);

void BM_Budget_PeriodicV_P8_M256_Paper_Limit3(benchmark::State& state) {
  RunPeriodic(state, Request("optimal-v", 8, 2, 256, 18522, 18086, 9337, 601), 3, 10, 60, 1.15,
              "solver-made, 1.15x zbv, in 60 s");
}
BENCHMARK(BM_Budget_PeriodicV_P8_M256_Paper_Limit3)->Iterations(1)->Unit(benchmark::kSecond);

void BM_Budget_Optimal_P4_M8_Calibrated_24MB(benchmark::State& state) {
  StatusOr<PlanRequest> request =
      WithCostFile(Request("optimal", 4, 1, 8, 1, 1, 1, 0), "calibrated_costs.textproto");
  if (!request.ok()) {
    state.SkipWithError(request.status().message().c_str());
    return;
  }
  request->memory.limit = 24e6;
  RunMeasured(state, *request, 5, 20, "no slower than the heuristics, in 20 s");
}
BENCHMARK(BM_Budget_Optimal_P4_M8_Calibrated_24MB)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
