// Runs the CP-SAT solver (OR-Tools, python/pipeplan_solver.py) on a solver instance: the
// SolveFn of BuildOptimalPlan (pipeplan/planner/optimal.h) for every front end: the pipeplan
// command and the torch op.
//
// The instance goes to the solver as JSON (pipeplan/formats/solver_files.h) in a private temporary
// directory, removed afterwards (also on SIGINT/SIGTERM); the solver's progress lines (on a
// terminal) pass through to stderr. Which Python runs it: $PIPEPLAN_SOLVER_PYTHON, else the one
// scripts/setup_solver.sh installed ortools into (known to the build); the script: the first of
// SolverScriptPlaces that is there. Every failure (no Python, no ortools, a crash, a solver past
// its time limit plus a grace period: 20 times the limit plus 15 minutes) is a Status naming the
// install step or what happened.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/planner/optimal.h"

namespace pipeplan::app {

// Where the solver script (pipeplan_solver.py) is looked for: $PIPEPLAN_SOLVER_SCRIPT alone
// when set; else, in order, beside `binary` (the file holding this code: the pipeplan command, a
// torch ops or Python module) and in its ../share/pipeplan, where `cmake --install` and a package
// put it; then the source tree this was built from.
std::vector<std::string> SolverScriptPlaces(const std::string& binary);

StatusOr<SolverOutcome> RunCpSat(const SolverInstance& instance);

}  // namespace pipeplan::app
