// The files a constraint solver process reads and writes for the solver-made strategies
// (pipeplan/planner/optimal.h): the instance as JSON (version 1; python/pipeplan_solver.py
// reads it) and the solver's answer as text, a `key values...` line each (`status`,
// `objective`, `bound`, `wall_s`, `stopped_by_clock`, `period`, `period_proven`, `starts`;
// lines with other keys are a later solver's and skipped).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "pipeplan/model/solver_instance.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// The instance as the solver script reads it, one line.
std::string SolverInstanceJson(const SolverInstance& instance);

// The solver script's result text; `ops` is the instance's op count (a solved answer has a
// start per op). An error names the malformed line.
StatusOr<SolverOutcome> ParseSolverOutcome(std::string_view text, size_t ops);

}  // namespace pipeplan
