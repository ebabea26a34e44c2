// `pipeplan partition`: which layers each stage holds, chosen together with the strategy and V,
// from per-layer figures (LayerCosts), for the smallest simulated step whose every rank fits
// the memory limit. Every split it weighs is a real plan: the strategy's order, its transfers
// and its bytes, simulated.
//
// The search, per strategy and V (docs/planning.md): two starts, the even split (torchtitan's
// default) and the split that makes the largest stage's F + B smallest (an exact dynamic
// programme), then steepest descent over the stage boundaries: every move of one boundary by
// one or two layers, and of two neighbouring boundaries together by one, taken while the best
// of them shortens the step (or, while nothing fits, brings the peak nearer the limit). A local
// search: exact only where tests enumerate every split. Under `auto`, every candidate is
// weighed at its starts; the three best, any other within 5% of the best, and any above the
// limit at both starts whose step there is shorter than the best's, are searched.
// A searched candidate with at most 2000 splits then has every split weighed, which certifies
// its split as the best there is for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/layer_costs.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/runtime_target.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {

struct PartitionRequest {
  LayerCosts layers;
  int ranks = 1;
  int microbatches = 1;
  std::string strategy = "auto";       // a catalogue strategy, or auto: every one
  std::optional<int> stages_per_rank;  // else every V the strategy takes (1, 2, 4)
  // Bytes a rank may hold (static included; needs memory figures): none, one for every rank,
  // or one per rank in rank order, e.g. no rank above what another plan of the model holds.
  // Strategies that plan under a limit are given the largest; each rank's peak is then
  // checked against its own.
  std::vector<double> memory_limits;
  LinkCosts link;                   // each transfer between stages
  Runtime runtime = Runtime::kAny;  // only the strategies it runs
  // A searched candidate with at most this many splits has every one weighed (0: never).
  double enumerate_up_to = 2000;
};

// One strategy at one V, with the best split found for it.
struct PartitionCandidate {
  std::string strategy;
  int stages_per_rank = 1;
  Status status;  // why it has no plan (fewer layers than stages, nothing fits, ...)
  LayerSplit split;
  double makespan = 0.0;
  double peak_memory = 0.0;  // the most any rank holds
  bool fits = false;         // within the memory limit (always, without one)
  bool searched = false;     // the local search ran (else: its starts alone)
  // Where every split was weighed (at most 2000), how many: the split is then the best.
  int exhaustive = 0;
  // What its simulated step rests on that no figure gave ("I + W = B"); empty: nothing.
  std::string assumes;
};

struct SplitPlan {
  LayerSplit split;
  Evaluated planned;
};

struct PartitionResult {
  SplitPlan best;
  size_t pick = 0;  // into candidates
  // Feasible candidates fastest first, then the others, in catalogue order.
  std::vector<PartitionCandidate> candidates;
  // The even split with the pick's strategy and V, and the even split with the fastest
  // strategy and V there, picked as the pick is (nullopt where nothing fits evenly).
  std::optional<SplitPlan> even_same;
  std::optional<SplitPlan> even_best;
  std::vector<std::string> notes;
  int evaluations = 0;  // plans simulated
};

// The chain's split minimising the largest stage's sum of `weights` into `stages` stages
// (exact; ties: the earliest boundaries). `stages` must be in 1..weights.size().
LayerSplit MinMaxSplit(const std::vector<double>& weights, int stages);

// Fails on invalid layers or topology, fewer layers than any candidate's stages, a memory
// limit without memory figures, limits neither one nor one per rank, or limits nothing fits
// (naming the smallest peak found, or with limits per rank the nearest split's worst rank).
StatusOr<PartitionResult> Partition(const PartitionRequest& request);

// Simulates `split` with one strategy at one V (no search): what the search weighs. Fails
// where a rank's peak is above its limit.
StatusOr<Evaluated> PlanSplit(const PartitionRequest& request, const std::string& strategy,
                              int stages_per_rank, const LayerSplit& split);

}  // namespace pipeplan
