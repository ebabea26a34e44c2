// Runs the CP-SAT solver (OR-Tools, python/pipeplan_solver.py) on a solver instance: the
// SolveFn of BuildOptimalPlan (pipeplan/planner/optimal.h) for every front end: the pipeplan
// command and the torch op.
//
// The instance goes to the solver as JSON in a private temporary directory, removed
// afterwards (also on SIGINT/SIGTERM); the solver's progress lines (on a terminal) pass through to
// stderr. Which Python runs it: $PIPEPLAN_SOLVER_PYTHON, else the one scripts/setup_solver.sh
// installed ortools into (known to the build); the script: $PIPEPLAN_SOLVER_SCRIPT, else the source
// tree's. Every failure (no Python, no ortools, a crash, a solver past its time limit plus a
// grace period: 20 times the limit plus 15 minutes) is a Status naming the install step or what
// happened.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "pipeplan/planner/optimal.h"

namespace pipeplan::app {

// The instance as the solver script reads it.
std::string SolverInstanceJson(const SolverInstance& instance);

// The solver script's result text; `ops` is the instance's op count.
StatusOr<SolverOutcome> ParseSolverOutcome(std::string_view text, size_t ops);

StatusOr<SolverOutcome> RunCpSat(const SolverInstance& instance);

}  // namespace pipeplan::app
