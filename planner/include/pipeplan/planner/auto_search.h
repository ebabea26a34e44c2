// `auto`: plan with every applicable strategy and setting (stages per rank, microbatch group
// size, memory-limit steps for the greedy zero-bubble schedulers) under the request's costs,
// and keep the fastest plan that fits the memory limit.
#pragma once

#include <vector>

#include "pipeplan/model/plan.h"

namespace pipeplan {

struct AutoCandidate {
  PlanRequest request;       // concrete: strategy, V, group size, limit, costs per stage
  Status status;             // why the candidate failed, when it did
  double makespan = 0.0;     // simulated, when it succeeded
  double peak_memory = 0.0;  // static + activations, max over ranks
};

struct AutoResult {
  Plan best;
  // Every candidate: feasible ones fastest first (ties: less memory, then catalogue order),
  // then the failures in catalogue order.
  std::vector<AutoCandidate> candidates;
};

// The request's costs describe one stage at the request's V (V = 0 or 1: a rank's whole
// share); candidates with another V get the same per-rank work split over their stages.
// Fails when no candidate fits the memory limit, naming the smallest limit that would fit and
// the strategy that needs it.
StatusOr<AutoResult> AutoSearch(const PlanRequest& request);

}  // namespace pipeplan
