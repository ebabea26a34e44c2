// A plan request made ready to plan, once, before any strategy sees it: every planning path
// (plan, compare's rows, auto's candidates, optimal, the torch op) goes through Normalize, and
// what it estimated on the way reaches the user as notes rather than being re-derived later.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"

namespace pipeplan {

// Figures fitted to a topology's stages (FitStageFigures) and what that estimated.
struct FittedFigures {
  CostModel costs;
  MemoryModel memory;
  bool cut = false;  // per-stage entries of another cut of the model were cut again by depth
  // In words, for the user: the figures cut by depth; one rank's static memory taken for
  // ranks no run measured. Empty when the figures fit as given.
  std::vector<std::string> notes;
};

// `costs` and `memory` (per stage of some cut, or uniform) fitted to `topology`'s stages; the
// notes name `strategy`, the plan they are for.
StatusOr<FittedFigures> FitFigures(const CostModel& costs, const MemoryModel& memory,
                                   const Topology& topology, std::string_view strategy);

// A calibrated cost file carries its memory model (in bytes): it replaces the request's, whose
// limit, when it has one, stays.
void TakeMemoryFromCosts(PlanRequest& request);

// Uniform figures of one rank's share (FigureScope::kRankShare) split over the stages a rank of
// the request's topology holds (ChunksPerShare: V, or 1 under dual placement), V and placement
// resolved; per-stage figures are kept. The request's figures are a stage's afterwards.
void SplitRankShare(PlanRequest& request);
// Its inverse, for searches over V (compare, auto): uniform figures of one stage at the
// request's V (V = 0 or 1: a rank's whole share) made one rank's share; per-stage figures
// kept. The request's figures are FigureScope::kRankShare afterwards.
PlanRequest MakeRankShare(PlanRequest request);

// A made plan re-timed under other figures (`simulate --costs`, pipeplan.simulate(plan,
// costs)): `costs` replaces the plan's, a memory model it brings replaces the plan's (whose
// limit stays, none where it had none), and the figures are fitted to the plan's stages. The
// actions are not touched. Returns what the fit estimated (FittedFigures::notes); errors name
// the cost model's fields.
StatusOr<std::vector<std::string>> RecostPlan(Plan& plan, CostModel costs);

struct NormalizedRequest {
  // V (0: the strategy's own) and placement resolved, memory taken from the costs, figures
  // fitted to this V's stages, F&B cells costed as the runtime runs them, every model checked.
  PlanRequest request;
  bool figures_cut = false;        // FittedFigures::cut
  std::vector<std::string> notes;  // FittedFigures::notes
};

// The request's costs and memory checked against its topology (the stage count, static memory
// per rank): what every plan's request must pass, Normalize's last step.
Status CheckRequestModels(const PlanRequest& request);

// The one normalisation of a request for a catalogue or solver-made strategy (not "auto").
// Errors name the request's fields (app::InFlagTerms turns them into flags).
StatusOr<NormalizedRequest> Normalize(PlanRequest request);

}  // namespace pipeplan
