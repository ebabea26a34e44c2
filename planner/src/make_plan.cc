#include "pipeplan/planner/make_plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/auto_search.h"

namespace pipeplan {
namespace {

// What auto picked, with its simulated figures, then what the pick rests on where a figure
// was assumed, then what was estimated for it.
Evaluated FromAutoSearch(AutoResult result) {
  Evaluated made = std::move(result.best);
  const AutoCandidate& pick = result.candidates[result.pick];
  std::string line = "auto chose " + StrategyAtV(made.plan.request);
  if (made.plan.request.runtime != Runtime::kAny) {
    line += " among what " + std::string(RuntimeName(made.plan.request.runtime)) + " runs";
  }
  line += ": makespan " + FormatCompact(pick.makespan) + ", peak memory " +
          FormatMemory(pick.peak_memory, made.plan.request.memory) +
          "; 'pipeplan compare --auto' lists the candidates";
  std::vector<std::string> notes = {std::move(line)};
  notes.insert(notes.end(), result.notes.begin(), result.notes.end());
  notes.insert(notes.end(), made.notes.begin(), made.notes.end());
  made.notes = std::move(notes);
  return made;
}

// The solver's verdict and the heuristic it started from.
Evaluated FromSolver(OptimalPlan result) {
  std::string line = result.plan.request.strategy + ": makespan " +
                     FormatCompact(result.timeline.metrics.makespan) + ", " +
                     result.plan.provenance.solver_status;
  if (!result.best_heuristic.empty()) {
    line += "; best heuristic " + result.best_heuristic + ": " +
            FormatCompact(result.best_heuristic_makespan);
  }
  std::vector<std::string> notes = {std::move(line)};
  notes.insert(notes.end(), result.notes.begin(), result.notes.end());
  return Evaluated{std::move(result.plan), std::move(result.timeline), std::move(notes)};
}

// What `auto` with the solver picked and auto's pick among the catalogue.
Evaluated FromAutoWithSolver(AutoOptimalResult result) {
  Evaluated made = std::move(result.best);
  const double makespan = made.timeline.metrics.makespan;
  std::string line =
      "auto chose " + StrategyAtV(made.plan.request) + ": makespan " + FormatCompact(makespan);
  if (!made.plan.provenance.solver_status.empty()) {
    line += ", " + made.plan.provenance.solver_status;
  }
  const std::string solved = std::to_string(result.solved) + " solver-made candidates";
  if (makespan < result.heuristic_makespan) {
    line += "; the catalogue's best: " + StrategyAtV(result.heuristic.request) + ": " +
            FormatCompact(result.heuristic_makespan) + "; " + solved;
  } else {
    line += "; none of " + solved + " was faster";
  }
  made.notes.insert(made.notes.begin(), std::move(line));
  return made;
}

Status CheckPlanOptions(const PlanRequest& request, const PlanOptions& options) {
  const bool solver_made = FindOptimalStrategy(request.strategy) != nullptr;
  if (options.with_solver && request.strategy != kAutoStrategy) {
    return InvalidArgument("with_solver applies to strategy auto only (" + request.strategy +
                           (solver_made ? " is solver-made already)" : " is one strategy)"));
  }
  if ((solver_made || options.with_solver) && !options.solve) {
    return InvalidArgument(request.strategy +
                           " is made by a constraint solver, and none was given "
                           "(PlanOptions::solve: app::RunCpSat runs OR-Tools' CP-SAT)");
  }
  return Status::Ok();
}

StatusOr<Evaluated> Made(const PlanRequest& request, const PlanOptions& options) {
  PIPEPLAN_RETURN_IF_ERROR(CheckPlanOptions(request, options));
  if (options.with_solver) {
    PIPEPLAN_ASSIGN_OR_RETURN(AutoOptimalResult result,
                              AutoSearchWithSolver(request, options.solver, options.solve));
    return FromAutoWithSolver(std::move(result));
  }
  if (request.strategy == kAutoStrategy) {
    PIPEPLAN_ASSIGN_OR_RETURN(AutoResult result, AutoSearch(request));
    return FromAutoSearch(std::move(result));
  }
  if (FindOptimalStrategy(request.strategy) != nullptr) {
    PIPEPLAN_ASSIGN_OR_RETURN(OptimalPlan result,
                              BuildOptimalPlan(request, options.solver, options.solve));
    return FromSolver(std::move(result));
  }
  return BuildAndSimulatePlan(request);
}

}  // namespace

StatusOr<Evaluated> MakePlan(const PlanRequest& request, const PlanOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(Evaluated made, Made(request, options));
  if (std::optional<std::string> note = StepEndNote(made.plan)) {
    made.notes.push_back(*std::move(note));
  }
  return made;
}

}  // namespace pipeplan
