// A scheduling instance for a constraint solver, and its answer, in integers: what the
// solver-made strategies (pipeplan/planner/optimal.h) hand a solver and read back. One op per
// compute part (F, I, W or B), precedences with transfer delays, a rank's receive overhead as
// idle time before an op, memory as amounts held between two ops. The files a solver process
// reads and writes are formats' (pipeplan/formats/solver_files.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeplan/model/action.h"

namespace pipeplan {

struct SolverOp {
  Action action;  // the compute part this op is (F, I, W or B)
  int rank = 0;
  int64_t duration = 0;  // scaled time
  int64_t setup = 0;     // idle time the rank needs right before it (receive overhead)
};

// start(after) >= end(before) + delay
struct SolverPrecedence {
  int before = 0;
  int after = 0;
  int64_t delay = 0;
};

// `amount` of `rank`'s memory is held from the start of op `from` until the end of op `to`
// (-1: until the step ends).
struct SolverHold {
  int rank = 0;
  int from = 0;
  int to = -1;
  int64_t amount = 0;
};

struct SolverInstance {
  int ranks = 0;
  std::vector<SolverOp> ops;
  std::vector<SolverPrecedence> precedences;
  std::vector<SolverHold> holds;
  // Per rank: what the holds may use at once (limit - static), when the request has a limit.
  std::optional<std::vector<int64_t>> capacity;
  std::vector<int64_t> static_memory;  // per rank, scaled
  std::vector<int64_t> hint;           // a start per op (a heuristic plan's), or empty
  int64_t hint_period = 0;             // periodic: the hint's period (0: none)
  int64_t horizon = 0;                 // no op ends later
  double time_scale = 1.0;             // integer units per unit of the request's time
  double memory_scale = 1.0;           // integer units per unit of the request's memory
  bool exact = true;                   // every figure scaled without rounding
  bool minimize_memory = false;        // the smallest limit any order fits, not the makespan
  // 0: the ops are the whole step. N > 0: the ops are one microbatch's, and the solver answers
  // a steady state of N microbatches, one every `SolverOutcome::period` (PeriodicOrder).
  int period_microbatches = 0;
  double time_limit_s = 60.0;
  int workers = 0;  // solver threads; 0: the machine's cores
};

// What the solver answers. `objective` and `bound` are in the instance's integer units.
struct SolverOutcome {
  enum class Result : uint8_t { kOptimal, kFeasible, kInfeasible, kUnknown };
  Result result = Result::kUnknown;
  int64_t objective = 0;
  int64_t bound = 0;
  double wall_s = 0.0;
  // A loaded machine's clock cap (10x the budget + 5 min), not the deterministic budget, ended
  // the search: the answer may differ on a rerun.
  bool stopped_by_clock = false;
  std::vector<int64_t> starts;  // per op, when optimal or feasible
  // Periodic instances: microbatch m runs op i at starts[i] + m * period; `objective` and
  // `bound` are one microbatch's span. `period_proven`: no period is shorter (it is the
  // busiest rank's work for one microbatch).
  int64_t period = 0;
  bool period_proven = false;
};

}  // namespace pipeplan
