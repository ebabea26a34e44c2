#include "pipeplan/planner/auto_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/model/figure_sources.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/runtime_support.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan {
namespace {

class AutoSearcher {
 public:
  AutoSearcher(PlanRequest request, std::span<const PlannedRequest> planned)
      : request_(std::move(request)), planned_(planned) {
    TakeMemoryFromCosts(request_);
    share_ = MakeRankShare(request_);
  }

  StatusOr<AutoResult> Run() {
    for (const Strategy* strategy : CandidateStrategies(request_)) AddCandidates(*strategy);
    // Only the plan the pick can be is kept with its timeline (a timeline of every candidate
    // at large P and M would be hundreds of MB), never copied: the fastest whose step rests on
    // measured figures alone (PickOf), and the fastest of all only while no candidate is such.
    std::optional<Kept> measured;
    std::optional<Kept> fastest;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      std::optional<Evaluated> planned = Evaluate(candidates_[i]);
      if (!planned.has_value()) continue;
      if (candidates_[i].assumes.empty()) {
        if (!measured.has_value() || Faster(i, measured->index)) {
          measured = Kept{i, *std::move(planned)};
        }
        fastest.reset();
      } else if (!measured.has_value() && (!fastest.has_value() || Faster(i, fastest->index))) {
        fastest = Kept{i, *std::move(planned)};
      }
    }
    std::vector<size_t> order(candidates_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const AutoCandidate& x = candidates_[a];
      const AutoCandidate& y = candidates_[b];
      if (x.status.ok() != y.status.ok()) return x.status.ok();
      return x.status.ok() && Faster(a, b);
    });
    AutoResult result;
    for (const size_t i : order) result.candidates.push_back(candidates_[i]);
    if (!measured.has_value() && !fastest.has_value()) return NothingFits();
    result.pick = PickOf(result.candidates);
    result.notes = NotesOn(result.candidates, result.pick);
    Kept& best = measured.has_value() ? *measured : *fastest;
    if (order[result.pick] != best.index) {
      return Internal("auto: the pick's plan was not kept (candidate " +
                      std::to_string(order[result.pick]) + ", kept " + std::to_string(best.index) +
                      ")");
    }
    result.best = std::move(best.planned);
    Provenance& provenance = result.best.plan.provenance;
    provenance.strategy = "auto -> " + result.best.plan.request.strategy;
    provenance.options = "chosen by auto among " + std::to_string(candidates_.size()) +
                         " candidates; " + provenance.options;
    return result;
  }

 private:
  struct Kept {
    size_t index;  // into candidates_
    Evaluated planned;
  };

  // Candidate a ahead of b, both planned: a shorter step, then less memory.
  bool Faster(size_t a, size_t b) const {
    const AutoCandidate& x = candidates_[a];
    const AutoCandidate& y = candidates_[b];
    if (x.makespan != y.makespan) return x.makespan < y.makespan;
    return x.peak_memory < y.peak_memory;
  }

  void AddCandidates(const Strategy& strategy) {
    const bool per_stage_costs = HasPerStageFigures(request_);
    for (const int v : StagesPerRankOptions(strategy)) {
      PlanRequest candidate = ShareAtStages(share_, strategy.name, strategy.placement, v);
      candidate.options.microbatch_group_size = 0;
      std::vector<std::string> notes;
      if (per_stage_costs) {
        // The user's cut of the model, cut again by depth where V differs, as Normalize does
        // (which then finds them fitted when the candidate is planned: it is normalised once).
        StatusOr<FittedFigures> fitted =
            FitFigures(candidate.costs, candidate.memory, candidate.topology, candidate.strategy);
        if (!fitted.ok()) {  // fails as planned, with the reason
          candidates_.push_back({candidate, Status::Ok(), 0, 0});
          continue;
        }
        candidate.costs = std::move(fitted->costs);
        candidate.memory = std::move(fitted->memory);
        notes = std::move(fitted->notes);
      }
      for (PlanRequest& variant : SettingVariants(strategy, candidate, request_.memory.limit)) {
        candidates_.push_back({std::move(variant), Status::Ok(), 0, 0});
        candidates_.back().notes = notes;
      }
    }
  }

  // The candidate planned, its figures filled in; nullopt (and its status) where it failed.
  std::optional<Evaluated> Evaluate(AutoCandidate& candidate) {
    StatusOr<Evaluated> planned = PlannedOrPlan(candidate.request);
    if (!planned.ok()) {
      candidate.status = planned.status();
      return std::nullopt;
    }
    candidate.makespan = planned->timeline.metrics.makespan;
    candidate.peak_memory = PeakMemory(planned->timeline);
    candidate.assumes = DescribeAssumptions(planned->plan, request_.costs, request_.memory);
    // Per-stage figures were fitted to the candidate above: its notes are that fit's.
    if (HasPerStageFigures(request_)) {
      planned->notes = candidate.notes;
    } else {
      candidate.notes = planned->notes;
    }
    return *std::move(planned);
  }

  // The plan made already for `request`, or a new one.
  StatusOr<Evaluated> PlannedOrPlan(const PlanRequest& request) const {
    for (const PlannedRequest& made : planned_) {
      if (*made.request == request) return *made.made;
    }
    return BuildAndSimulatePlan(request);
  }

  // The fastest feasible candidate that assumes nothing; the fastest where all do.
  static size_t PickOf(const std::vector<AutoCandidate>& sorted) {
    for (size_t i = 0; i < sorted.size() && sorted[i].status.ok(); ++i) {
      if (sorted[i].assumes.empty()) return i;
    }
    return 0;
  }

  // What to profile so that the assumed figures become measured ones: a zero-bubble plan's
  // profile calibrated with the one these figures came from, or, where no run gave them (B
  // alone given), I and W measured and given.
  std::string WhatToProfile(const AutoCandidate& candidate) const {
    const auto assumes = [&](const char* what) {
      return candidate.assumes.find(what) != std::string::npos;
    };
    std::string out;
    if (assumes("figures cut")) {
      out = "profile " + candidate.request.strategy +
            " at V=" + std::to_string(candidate.request.topology.stages_per_rank) +
            " in the same runtime to measure its stages";
    }
    if (assumes("I + W = B")) {
      out += out.empty() ? "" : "; ";
      out += request_.costs.runs.empty()
                 ? "give I and W (backward_input, backward_weight) as your runtime's split "
                   "backward measures them: a profile of a zero-bubble plan (zb-h1) calibrates them"
                 : "profile a zero-bubble plan (zb-h1; interleaved-zb or zbv for V = 2) in the "
                   "same runtime and calibrate its profile with this one";
    }
    if (assumes("B = I + W")) {
      out += out.empty() ? "" : "; ";
      out +=
          "profile a plan with full backwards (1f1b; interleaved-1f1b for V = 2) in the same "
          "runtime and calibrate its profile with this one";
    }
    return out;
  }

  std::vector<std::string> NotesOn(const std::vector<AutoCandidate>& sorted, size_t pick) const {
    const AutoCandidate& picked = sorted[pick];
    if (!picked.assumes.empty()) {
      return {"every candidate's step rests on figures no run measured (" + picked.assumes + "); " +
              StrategyAtV(picked.request) +
              " is fastest only as far as they hold: " + WhatToProfile(picked)};
    }
    if (pick == 0) return {};
    const AutoCandidate& fastest = sorted.front();
    const double faster = 1.0 - fastest.makespan / picked.makespan;
    return {StrategyAtV(fastest.request) + " simulates " +
            FormatNumber(std::round(faster * 1000) / 10) + "% faster than " +
            StrategyAtV(picked.request) + " only if " + fastest.assumes +
            " (assumed: no run measured it), so it is not picked; " + WhatToProfile(fastest)};
  }

  // With a limit nothing fits: find the smallest limit that would. A candidate that plans
  // under a limit (zb, zbv) needs the smallest limit it takes, which its own peak may stay
  // below; any other needs its peak.
  Status NothingFits() const {
    if (!request_.memory.limit.has_value()) {
      return InvalidArgument("auto: no strategy can plan this request (" + FirstReason() + ")");
    }
    double smallest = std::numeric_limits<double>::infinity();
    std::string needed_by;
    for (const AutoCandidate& candidate : candidates_) {
      const std::optional<double> needed = SmallestLimitOf(candidate.request);
      if (needed.has_value() && *needed < smallest) {
        smallest = *needed;
        needed_by = candidate.request.strategy +
                    " (V=" + std::to_string(candidate.request.topology.stages_per_rank) + ")";
      }
    }
    if (!std::isfinite(smallest)) {
      return FailedPrecondition("auto: no strategy fits memory limit " +
                                request_.memory.Describe(*request_.memory.limit) + " (" +
                                FirstReason() + ")");
    }
    return FailedPrecondition("auto: no strategy fits memory limit " +
                              request_.memory.Describe(*request_.memory.limit) +
                              "; the smallest limit that fits is " +
                              request_.memory.Describe(smallest) + ", needed by " + needed_by);
  }

  // The smallest limit with which `request`'s strategy plans it and its plan's peak holds
  // it; nullopt when it cannot plan the request at all.
  static std::optional<double> SmallestLimitOf(const PlanRequest& request) {
    const StatusOr<PlanRequest> least = AtSmallestLimit(request);
    if (!least.ok()) return std::nullopt;
    StatusOr<Evaluated> planned = BuildAndSimulatePlan(*least);
    if (!planned.ok()) return std::nullopt;
    return std::max(least->memory.limit.value_or(0.0), PeakMemory(planned->timeline));
  }

  std::string FirstReason() const {
    return candidates_.empty() ? "no applicable strategy" : candidates_.front().status.message();
  }

  PlanRequest request_;  // memory taken from the costs
  PlanRequest share_;    // request_ with uniform figures as a rank's share (ShareAtStages)
  std::span<const PlannedRequest> planned_;
  std::vector<AutoCandidate> candidates_;
};

// Group sizes from P to 4P that divide the microbatches (or leave at least P over).
std::vector<PlanRequest> GroupSizeVariants(PlanRequest candidate) {
  const int p = candidate.topology.ranks;
  const int m = candidate.topology.microbatches;
  std::vector<PlanRequest> out;
  for (int g = p; g <= m && g <= 4 * p; g *= 2) {
    if (m % g != 0 && m % g < p) continue;
    candidate.options.microbatch_group_size = g;
    out.push_back(candidate);
  }
  if (out.empty()) {
    candidate.options.microbatch_group_size = 0;  // lets the planner report why it fails
    out.push_back(std::move(candidate));
  }
  return out;
}

// The greedy scheduler is not monotone in its limit: it orders under whole activations from P
// up to the asked limit (2P without one), each plan checked against the asked limit.
std::vector<PlanRequest> MemoryStepVariants(PlanRequest candidate,
                                            std::optional<double> asked_limit) {
  const int p = candidate.topology.ranks;
  const double activation =
      candidate.memory.Activation(StageId(0), ChunksPerShare(candidate.topology));
  const double base = candidate.memory.LargestFixed(
      StageMap(candidate.topology),
      candidate.topology.stages_per_rank * candidate.topology.microbatches);
  const double top = asked_limit.value_or(base + 2 * p * activation);
  std::vector<PlanRequest> out;
  for (int k = 1; k <= 2 * p; ++k) {
    const double limit = base + k * activation;
    if (limit > top * (1 + 1e-12)) break;
    if (k < p && base + (k + 1) * activation <= top) continue;  // below P only as a last resort
    candidate.options.order_limit = limit;
    out.push_back(candidate);
  }
  if (out.empty()) {
    candidate.options.order_limit = top;
    out.push_back(std::move(candidate));
  }
  return out;
}

// The setting's variants of a strategy that orders under a limit of its own, with the limits
// above the asked one that `plan` tries (OrderLimitsAbove) as candidates of their own, so no
// candidate's plan repeats that search: each variant orders under its own limit, the asked
// one where its setting gives none.
std::vector<PlanRequest> WithRaisedOrderLimits(std::vector<PlanRequest> variants,
                                               const PlanRequest& candidate,
                                               std::optional<double> asked_limit) {
  PlanRequest asked = candidate;
  asked.memory.limit = asked_limit;
  asked.options.order_limit.reset();
  const StatusOr<std::vector<double>> raised = OrderLimitsAbove(asked);
  if (!raised.ok() || raised->empty()) return variants;  // planning it says why it fails
  for (PlanRequest& variant : variants) {
    if (!variant.options.order_limit.has_value()) variant.options.order_limit = asked_limit;
  }
  asked.options.order_limit = asked_limit;
  if (std::find(variants.begin(), variants.end(), asked) == variants.end()) {
    variants.push_back(asked);
  }
  for (const double limit : *raised) {
    asked.options.order_limit = limit;
    variants.push_back(asked);
  }
  return variants;
}

}  // namespace

std::vector<PlanRequest> SettingVariants(const Strategy& strategy, const PlanRequest& candidate,
                                         std::optional<double> asked_limit) {
  std::vector<PlanRequest> variants;
  switch (strategy.setting) {
    case StrategySetting::kGroupSizes:
      variants = GroupSizeVariants(candidate);
      break;
    case StrategySetting::kMemorySteps:
      variants = MemoryStepVariants(candidate, asked_limit);
      break;
    case StrategySetting::kNone:
      variants = {candidate};
      break;
  }
  if (strategy.smallest_limit == nullptr || !asked_limit.has_value()) return variants;
  return WithRaisedOrderLimits(std::move(variants), candidate, asked_limit);
}

std::vector<const Strategy*> CandidateStrategies(const PlanRequest& request) {
  std::vector<const Strategy*> out;
  for (const Strategy& strategy : AllStrategies()) {
    if (request.options.post_validation && !strategy.post_validation) continue;
    if (!CheckRunsOn(request.runtime, strategy.name, strategy.placement,
                     request.options.post_validation)
             .ok()) {
      continue;
    }
    out.push_back(&strategy);
  }
  return out;
}

PlanRequest ShareAtStages(const PlanRequest& share, std::string_view strategy, Placement placement,
                          int stages_per_rank) {
  PlanRequest request = share;
  request.strategy = std::string(strategy);
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.placement = placement;
  SplitRankShare(request);
  return request;
}

std::vector<int> StagesPerRankOptions(const Strategy& strategy) {
  std::vector<int> options;
  for (const int v : {1, 2, 4}) {
    if (v < strategy.min_stages_per_rank) continue;
    if (strategy.max_stages_per_rank > 0 && v > strategy.max_stages_per_rank) continue;
    options.push_back(v);
  }
  return options;
}

std::string StrategyAtV(const PlanRequest& request) {
  std::string out = request.strategy + " (V=" + std::to_string(request.topology.stages_per_rank);
  if (request.options.microbatch_group_size > 0) {
    out += ", microbatch groups of " + std::to_string(request.options.microbatch_group_size);
  }
  return out + ")";
}

StatusOr<AutoResult> AutoSearch(const PlanRequest& request,
                                std::span<const PlannedRequest> planned) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(
      Topology{request.topology.ranks, 1, request.topology.microbatches, Placement::kLoop}));
  return AutoSearcher(request, planned).Run();
}

}  // namespace pipeplan
