// `optimal`, `optimal-v` and `optimal-fb`: the compute order with the smallest simulated
// makespan for a request, found by a constraint solver and certified by its proven bound.
//
// This file is the solver's contract in planner terms: the request becomes a scheduling
// instance in integers (one op per F, I, W or B; precedences with transfer delays; a rank's
// receive overhead as idle time before an op; memory as amounts held between two ops), the
// solver's start times become a compute order, and that order goes through comm insertion,
// validation and simulation like every strategy's. The instance and the solver's answer are
// model types (pipeplan/model/solver_instance.h), their files formats'
// (pipeplan/formats/solver_files.h); running the solver is the caller's (every front end runs
// OR-Tools CP-SAT in a Python process through pipeplan/app/cp_sat_solver.h): this layer stays
// pure.
//
// The instance is the simulator's semantics exactly when every figure scales to an integer
// (`SolverInstance::exact`); then a solver optimum is the simulated makespan. F&B overlap cells
// are not in the model: the optimum is over orders of F, I and W (or F and B) only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/solver_instance.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/planner/auto_search.h"

namespace pipeplan {

struct OptimalStrategy {
  std::string_view name;
  std::string_view summary;
  Placement placement;
  int min_stages_per_rank;
  int max_stages_per_rank;  // 0 = no upper bound
  bool split_backward;      // I and W (zero-bubble family), else B whole
};

// The solver-made strategies, in the order --help lists them.
const std::vector<OptimalStrategy>& OptimalStrategies();
// nullptr when `name` is not one of them.
const OptimalStrategy* FindOptimalStrategy(std::string_view name);

// Largest whole-step instance the solver is given (ops = compute parts). BuildOptimalPlan
// solves a larger request as a periodic steady state (see PeriodicOrder).
inline constexpr int kMaxSolverOps = 4000;

using SolveFn = std::function<StatusOr<SolverOutcome>(const SolverInstance&)>;

// The instance for a normalized request of an optimal strategy (V, placement resolved).
// Fails for an instance over kMaxSolverOps naming the sizes.
StatusOr<SolverInstance> BuildSolverInstance(const PlanRequest& request);

// Per rank, the ops in order of their start (ties: end, then instance order, which lists every
// producer before its consumers).
ComputeOrder OrderFromStarts(const SolverInstance& instance, const std::vector<int64_t>& starts);

// The order of a periodic answer (`instance` holds one microbatch's ops): op i of microbatch
// m starts at starts[i] + m * period, for m < microbatches; ties as OrderFromStarts.
ComputeOrder PeriodicOrder(const SolverInstance& instance, const std::vector<int64_t>& starts,
                           int64_t period, int microbatches);

// The search budget is CP-SAT's deterministic time (a count of work, not the clock) and CP-SAT
// runs one worker, so the same request gives the same plan (OR-Tools is pinned).
struct OptimalOptions {
  double time_limit_s = 60.0;
  int workers = 1;
  // Solve one steady-state period and repeat it, whatever the size (--periodic); otherwise
  // only a request over kMaxSolverOps is solved that way.
  bool periodic = false;
};

struct OptimalPlan {
  Plan plan;  // provenance carries the solver's status and proven bound
  Timeline timeline;
  // The best heuristic of the catalogue for the same request (the warm start), when one
  // plans it: its name and simulated makespan.
  std::string best_heuristic;
  double best_heuristic_makespan = 0.0;
  bool solver_improved = false;  // the plan is the solver's, strictly faster than the heuristic
  // A periodic solve's steady state (in the request's time; also when the heuristic's plan
  // stood): one microbatch every `period`; `period_proven` when no steady state has a shorter
  // one. 0 for a whole-step solve.
  double period = 0.0;
  bool period_proven = false;
  std::vector<std::string> notes = {};  // Normalize's: what was estimated for the request
};

// Plans the request with the solver: warm-started from the catalogue's best plan for the same
// request and never worse than it. Fails when nothing fits the memory limit, naming the
// smallest limit the solver proves (or finds) when it gets that far. A large request (over
// kMaxSolverOps ops, or `options.periodic`) is solved as one steady-state period of one
// microbatch, repeated M times with its own warm-up and cool-down: the best such period, not
// a proven optimum of the whole step.
StatusOr<OptimalPlan> BuildOptimalPlan(const PlanRequest& request, const OptimalOptions& options,
                                       const SolveFn& solve);

// `auto` with the solver (plan --strategy auto --optimal): AutoSearch's pick, then for each
// placement and V among its feasible candidates that a solver-made strategy covers (loop:
// optimal; V shape at V = 2: optimal-v) the solver, warm-started from that group's fastest
// candidate and under the request's memory limit; the fastest plan of all. Each solve gets
// `options.time_limit_s`. Refuses post-validation (the solver's orders carry none).
struct AutoOptimalResult {
  Evaluated best;  // the fastest: auto's pick or a solver-made plan, its timeline and notes
  Plan heuristic;  // auto's pick among the catalogue
  double heuristic_makespan = 0.0;
  int solved = 0;  // how many solver-made candidates were planned
};
StatusOr<AutoOptimalResult> AutoSearchWithSolver(const PlanRequest& request,
                                                 const OptimalOptions& options,
                                                 const SolveFn& solve);

}  // namespace pipeplan
