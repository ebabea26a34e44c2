// The one way in: every front end (the pipeplan command's plan and compare, the torch op, the
// Python package) asks MakePlan for a plan, whatever the request's strategy: a catalogue
// strategy, auto, a solver-made one, or auto with the solver. It picks the path, runs
// Normalize once per plan it makes, and hands the plan on with its timeline and, in words, how
// it was chosen and what was estimated for it, so every front end says the same.
#pragma once

#include "pipeplan/planner/optimal.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {

// What a request does not say about how to plan it.
struct PlanOptions {
  // auto: also the solver-made strategies (AutoSearchWithSolver). Refused with post-validation
  // and with any other strategy.
  bool with_solver = false;
  OptimalOptions solver = {};
  // Runs the solver (app::RunCpSat); the solver-made strategies and `with_solver` fail naming
  // it when it is empty, every other request plans without it.
  SolveFn solve = nullptr;
};

// The request's plan and its timeline; `notes` (for stderr, the op's notes) say first how the
// plan was chosen where a search chose it ("auto chose zbv (V=2): makespan ..."; the solver's
// verdict), then what its pick rests on, then Normalize's estimates.
StatusOr<Evaluated> MakePlan(const PlanRequest& request, const PlanOptions& options);

}  // namespace pipeplan
