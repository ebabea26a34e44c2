// The plan request (what the user asks for) and the plan (per-rank action lists plus
// where they came from). A Plan is the "what"; a Timeline is the "when".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/runtime_target.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

struct StrategyOptions {
  int microbatch_group_size = 0;  // interleaved-1f1b: 0 means the default (P)
  bool post_validation = false;   // zero-bubble family: insert PV and tag rollbacks
  // The strategies that order under a memory limit of their own (Strategy::smallest_limit:
  // zb, zbv, ...): the limit their order counts against instead of memory.limit, which the
  // plan's simulated peak must still fit; +infinity: none (the strategy's default). Unset:
  // memory.limit, and the planner also tries the limits above it (OrderLimitsAbove).
  std::optional<double> order_limit;

  bool operator==(const StrategyOptions&) const = default;
};

// What a request's uniform figures (one cost and memory entry for every stage) describe.
// Per-stage figures are always each stage's own.
enum class FigureScope {
  kStage,      // one stage at the request's V (plan's flags, request files, the torch op)
  kRankShare,  // one rank's whole share, split over the stages it holds (compare, auto's
               // candidates); Normalize splits it, and planned requests are kStage
};

struct PlanRequest {
  Topology topology;
  std::string strategy = "1f1b";
  StrategyOptions options;
  CostModel costs;
  MemoryModel memory;
  Runtime runtime = Runtime::kAny;  // only what this runtime executes is planned
  FigureScope figures = FigureScope::kStage;

  bool operator==(const PlanRequest&) const = default;
};

struct RankProgram {
  RankId rank;
  std::vector<Action> actions;

  bool operator==(const RankProgram&) const = default;
};

struct Provenance {
  std::string tool_version;
  std::string strategy;
  std::string options;  // human-readable summary of the strategy options used
  // Solver-made plans (optimal, optimal-v, optimal-fb): "optimal" or "feasible, gap X% to the
  // proven bound", and that bound on the makespan (request's time unit; 0 when none).
  std::string solver_status;
  double proven_bound = 0.0;

  bool operator==(const Provenance&) const = default;
};

struct Plan {
  PlanRequest request;
  std::vector<RankProgram> programs;  // one per rank, index = rank
  Provenance provenance;

  bool operator==(const Plan&) const = default;
};

// Compute-only per-rank order, as strategies produce it (no comm actions).
using ComputeOrder = std::vector<std::vector<Action>>;

}  // namespace pipeplan
