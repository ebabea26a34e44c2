// `auto`: plan with every applicable strategy and setting (stages per rank, microbatch group
// size, memory-limit steps for the greedy zero-bubble schedulers) under the request's costs,
// and keep the fastest plan that fits the memory limit.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {

struct Strategy;  // pipeplan/strategies/strategy.h

struct AutoCandidate {
  PlanRequest request;       // concrete: strategy, V, group size, limit, costs per stage
  Status status;             // why the candidate failed, when it did
  double makespan = 0.0;     // simulated, when it succeeded
  double peak_memory = 0.0;  // static + activations, max over ranks
  // What its simulated step rests on that no run measured ("I + W = B"); empty: nothing.
  std::string assumes = {};
  // What the planner estimated for it (Evaluated::notes: figures cut by depth, ...).
  std::vector<std::string> notes = {};
};

// The V values auto tries for `strategy`: 1, 2 and 4 within its V range.
std::vector<int> StagesPerRankOptions(const Strategy& strategy);

// "zbv (V=2)", "interleaved-1f1b (V=2, microbatch groups of 4)": how notes name a candidate
// or a pick (the group size where one was set).
std::string StrategyAtV(const PlanRequest& request);

struct AutoResult {
  Evaluated best;  // the pick, its timeline and its notes
  // Every candidate: feasible ones fastest first (ties: less memory, then catalogue order),
  // then the failures in catalogue order.
  std::vector<AutoCandidate> candidates;
  size_t pick = 0;  // the candidate `best` is
  // What the user must know about the pick: a faster candidate passed over because its step
  // rests on an assumed figure, or that every candidate's does (figure_sources.h).
  std::vector<std::string> notes = {};
};

// The catalogue strategies `auto` and `compare` plan for `request`, in catalogue order: those
// its runtime runs and, with post-validation asked, those that take it.
std::vector<const Strategy*> CandidateStrategies(const PlanRequest& request);

// The requests auto plans of `candidate` (a request of `strategy` at its V, figures fitted) for
// the strategy's setting (StrategySetting): one per group size (P to 4P) or per memory step
// (whole activations up to `asked_limit`, 2P without one); `candidate` alone for none.
// partition sweeps them at the split it found.
std::vector<PlanRequest> SettingVariants(const Strategy& strategy, const PlanRequest& candidate,
                                         std::optional<double> asked_limit);

// `share` asked of `strategy` at V = `stages_per_rank` under `placement`, its figures made a
// stage's (SplitRankShare): uniform figures of FigureScope::kRankShare, one rank's share of the
// model, split over the stages that share becomes (ChunksPerShare: V under loop and V
// placement; 1 under dual placement, whose two model copies each hold a whole share);
// per-stage figures stay as given, for Normalize to fit by depth. compare's rows and auto's
// candidates are made by it.
PlanRequest ShareAtStages(const PlanRequest& share, std::string_view strategy, Placement placement,
                          int stages_per_rank);

// A plan made already for `request` (compare's rows): auto takes it for a candidate whose
// request equals it instead of planning and simulating that candidate again. The pointers must
// outlive the search.
struct PlannedRequest {
  const PlanRequest* request;
  const Evaluated* made;
};

// The request's uniform figures describe what its `figures` says: one stage at the request's V
// (V = 0 or 1: a rank's whole share), or one rank's share; candidates with another V get the
// same per-rank work split over their stages.
// Only strategies the request's runtime runs are candidates (runtime_support.h). The pick is
// the fastest candidate whose step rests on measured (or given) figures alone; a faster one
// whose advantage rests on an assumed figure (cost_model.h: calibrate's I = W = B / 2 where no
// run split the backward) is named in a note with what to profile, and picked only where every
// candidate rests on one. Fails when no candidate fits the memory limit, naming the smallest
// limit that would fit and the strategy that needs it.
StatusOr<AutoResult> AutoSearch(const PlanRequest& request,
                                std::span<const PlannedRequest> planned = {});

}  // namespace pipeplan
