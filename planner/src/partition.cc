#include "pipeplan/planner/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "partition_pick.h"
#include "pipeplan/model/figure_sources.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan {
namespace {

using partition_pick::InBytes;
using partition_pick::NothingFits;
using partition_pick::Pick;
using partition_pick::PickOfCandidates;

// Which candidates `auto` searches beyond their starts: the three best at their starts, any
// other whose best start is within 5% of the best one's step (and, under a limit, any whose
// starts are above it but shorter than the best: Partition).
constexpr size_t kSearched = 3;
constexpr double kSearchedWithin = 0.05;

Topology TopologyOf(const PartitionRequest& request, const Strategy& strategy, int v) {
  return Topology{.ranks = request.ranks,
                  .stages_per_rank = v,
                  .microbatches = request.microbatches,
                  .placement = strategy.placement};
}

// The stages one model copy is cut into.
int ChainStages(const Topology& topology) {
  return topology.placement == Placement::kDual ? topology.ranks : topology.num_stages();
}

// The limit the strategies plan under and the planner checks: the largest asked.
std::optional<double> LoosestLimit(const PartitionRequest& request) {
  if (request.memory_limits.empty()) return std::nullopt;
  return *std::max_element(request.memory_limits.begin(), request.memory_limits.end());
}

double LimitOfRank(const PartitionRequest& request, int rank) {
  return request.memory_limits.size() == 1 ? request.memory_limits.front()
                                           : request.memory_limits[static_cast<size_t>(rank)];
}

// Each rank's peak against its own limit (the planner checked the largest). `over`: the most
// any rank holds above its limit (negative where every rank fits), which orders plans that do
// not fit by how near they come.
Status CheckRankLimits(const PartitionRequest& request, const Timeline& timeline, double* over) {
  *over = -std::numeric_limits<double>::infinity();
  Status status = Status::Ok();
  for (const RankTimeline& rank : timeline.ranks) {
    const double limit = LimitOfRank(request, rank.rank.value);
    const double above = rank.peak_memory - limit;
    // The planner's tolerance (CheckMemoryLimit), so that one limit for every rank is
    // checked as it is there.
    if (rank.peak_memory > limit * (1 + 1e-12) && status.ok()) {
      status = FailedPrecondition("rank " + std::to_string(rank.rank.value) + " holds " +
                                  InBytes().Describe(rank.peak_memory) +
                                  ", above its memory limit " + InBytes().Describe(limit));
    }
    *over = std::max(*over, above);
  }
  return status;
}

// torch.distributed.pipelining's stages run the plan (torchtitan drives them too).
bool RunsTorchsStages(Runtime runtime) {
  return runtime == Runtime::kTorch || runtime == Runtime::kTorchtitan;
}

// A stage's output, sent on, is still held from its F to its B (under torch's split backward
// to its W): the runtime keeps it to start the backward from (torch's fwd_cache, the
// executor's root), bytes none of the layers' saved tensors count, as the next stage's first
// layer saves its own copy. Megatron frees the sent output's storage
// (deallocate_pipeline_outputs). A last stage's output is its loss's input: torch's stages
// keep it too (torchtitan's), and torch's step keeps every microbatch's to return them joined
// (return_outputs=True, its default) to the step's end, which covers its F to B. Under a
// split backward torch's stages also keep a stage's received output gradient from I to W.
void CountHeldOutputs(const PartitionRequest& request, const LayerSplit& split,
                      MemoryModel* memory) {
  const int count = static_cast<int>(split.size());
  for (size_t s = 0; s < memory->stages.size(); ++s) {
    const int k = static_cast<int>(s) % count;
    const bool last = k + 1 == count;
    const bool held =
        last ? request.runtime == Runtime::kTorchtitan : request.runtime != Runtime::kMegatron;
    if (!held) continue;
    const double output = StageOutputBytes(request.layers, split, k);
    memory->stages[s].activation += output;
    // torch's split backward keeps the received output gradient from I to W too
    // (backward_state); the last stage's comes from its loss, inside I.
    if (!last && RunsTorchsStages(request.runtime)) memory->stages[s].allocated_by_input += output;
  }
  if (request.runtime == Runtime::kTorch) {
    memory->last_stage_data_per_microbatch = request.layers.layers.back().output_bytes;
  }
}

// torch's stages allocate, once and for their life, a receive buffer per microbatch for each
// input of a non-first stage and each output gradient of a non-last stage, into which the
// receives land (_prepare_forward_infra, _create_grad_recv_info): static memory, M messages a
// direction. A neighbour on the same rank hands its tensor over instead (set_local_fwd_input).
// Either way the first layer's saved input is not new memory: the buffer, or the previous
// stage's held output.
void CountTorchsReceiveBuffers(const PartitionRequest& request, const LayerSplit& split,
                               const Topology& topology, MemoryModel* memory) {
  if (!RunsTorchsStages(request.runtime) || topology.placement == Placement::kDual) return;
  const StageMap map(topology);
  const auto output_of = [&](size_t k) {
    return StageOutputBytes(request.layers, split, static_cast<int>(k));
  };
  const auto remote = [&](size_t a, size_t b) {
    return map.RankOf(StageId(static_cast<int>(a))) != map.RankOf(StageId(static_cast<int>(b)));
  };
  const double microbatches = topology.microbatches;
  for (size_t k = 0; k < split.size(); ++k) {
    StageMemory& stage = memory->stages[k];
    if (k > 0) {
      stage.activation -= stage.received_input;
      stage.received_input = 0;
      if (remote(k - 1, k)) stage.static_bytes += microbatches * output_of(k - 1);
    }
    if (k + 1 < split.size() && remote(k, k + 1)) {
      stage.static_bytes += microbatches * output_of(k);
    }
  }
}

PlanRequest RequestOf(const PartitionRequest& request, const Strategy& strategy, int v,
                      const LayerSplit& split) {
  PlanRequest out;
  out.topology = TopologyOf(request, strategy, v);
  out.strategy = std::string(strategy.name);
  out.runtime = request.runtime;
  StageFigures figures = FiguresOfSplit(request.layers, split, request.link, out.topology);
  out.costs = std::move(figures.costs);
  out.memory = std::move(figures.memory);
  out.memory.limit = LoosestLimit(request);
  if (request.layers.HasMemory()) {
    CountHeldOutputs(request, split, &out.memory);
    CountTorchsReceiveBuffers(request, split, out.topology, &out.memory);
  }
  return out;
}

// A split weighed: what the search compares.
struct Score {
  bool planned = false;  // some plan exists (else `status` says why)
  bool fits = false;
  double makespan = std::numeric_limits<double>::infinity();
  double peak = std::numeric_limits<double>::infinity();
  // The most a rank holds above its limit (the peak itself without limits).
  double over = std::numeric_limits<double>::infinity();
  Status status;
};

// a ahead of b: a plan; then fitting; then (both fitting) a shorter step, then less memory;
// (neither fitting) nearer its limits.
bool Better(const Score& a, const Score& b) {
  if (a.planned != b.planned) return a.planned;
  if (a.fits != b.fits) return a.fits;
  if (a.fits && a.makespan != b.makespan) return a.makespan < b.makespan;
  if (!a.fits && a.over != b.over) return a.over < b.over;
  return a.peak < b.peak;
}

// A plan's score: it fits where every rank is within its own limit. `planned_within` false:
// the planner refused it under the largest limit (`why`), and it was planned without one.
Score ScoreOf(const PartitionRequest& request, const Evaluated& planned, bool planned_within,
              const Status& why) {
  Score score{.planned = true,
              .fits = false,
              .makespan = planned.timeline.metrics.makespan,
              .peak = PeakMemory(planned.timeline),
              .over = PeakMemory(planned.timeline),
              .status = why};
  if (request.memory_limits.empty()) {
    score.fits = planned_within;
    return score;
  }
  const Status ranks = CheckRankLimits(request, planned.timeline, &score.over);
  score.fits = planned_within && ranks.ok();
  // With a limit per rank, the rank over its own says more than the largest limit's refusal.
  if (planned_within || (request.memory_limits.size() > 1 && !ranks.ok())) score.status = ranks;
  return score;
}

std::string Assumes(const Evaluated& planned) {
  const FigureKinds assumed =
      Common(AssumedKinds(planned.plan.request.costs), KindsRead(planned.plan));
  return assumed == FigureKinds{} ? std::string() : DescribeAssumption(assumed);
}

// One strategy at one V: its splits weighed (each once) and the best kept with its plan.
class SplitSearch {
 public:
  SplitSearch(const PartitionRequest& request, const Strategy& strategy, int v, int* evaluations)
      : request_(request), strategy_(strategy), v_(v), evaluations_(evaluations) {}

  int chain_stages() const { return ChainStages(TopologyOf(request_, strategy_, v_)); }

  // `keep`: where to keep the split's plan too (a split not weighed before).
  const Score& Weigh(const LayerSplit& split, std::optional<SplitPlan>* keep = nullptr) {
    const auto known = scores_.find(split);
    if (known != scores_.end()) return known->second;
    Score score;
    PlanRequest planned_request = RequestOf(request_, strategy_, v_, split);
    StatusOr<Evaluated> planned = BuildAndSimulatePlan(planned_request);
    ++*evaluations_;
    if (!planned.ok() && !request_.memory_limits.empty()) {
      // Where it does not fit, its peaks without the limit say how far off it is.
      const Status refused = planned.status();
      planned_request.memory.limit.reset();
      planned = BuildAndSimulatePlan(planned_request);
      ++*evaluations_;
      score.status = refused;
      if (planned.ok()) score = ScoreOf(request_, *planned, false, refused);
    } else if (!planned.ok()) {
      score.status = planned.status();
    } else {
      score = ScoreOf(request_, *planned, true, Status::Ok());
    }
    if (planned.ok() && keep != nullptr) *keep = SplitPlan{.split = split, .planned = *planned};
    if (planned.ok() && (!best_.has_value() || Better(score, best_score_))) {
      best_ = SplitPlan{.split = split, .planned = *std::move(planned)};
      best_score_ = score;
    }
    return scores_.emplace(split, std::move(score)).first->second;
  }

  // Steepest descent from `start` (weighed before): to the best of its neighbours while that is
  // better, then stop.
  void Descend(const LayerSplit& start) {
    searched_ = true;
    LayerSplit at = start;
    Score here = Weigh(at);
    for (;;) {
      std::optional<LayerSplit> next;
      Score next_score = here;
      for (LayerSplit& neighbour : Neighbours(at)) {
        const Score& score = Weigh(neighbour);
        if (Better(score, next_score)) {
          next_score = score;
          next = std::move(neighbour);
        }
      }
      if (!next.has_value()) return;
      at = *std::move(next);
      here = next_score;
    }
  }

  // The strategy's settings (group sizes, memory steps: what auto sweeps) tried at the best
  // split found, which was searched with the defaults; the best of them kept.
  void SweepSettings() {
    if (strategy_.setting == StrategySetting::kNone || !best_.has_value() || !best_score_.fits) {
      return;
    }
    const LayerSplit split = best_->split;
    for (const PlanRequest& variant : SettingVariants(
             strategy_, RequestOf(request_, strategy_, v_, split), LoosestLimit(request_))) {
      StatusOr<Evaluated> planned = BuildAndSimulatePlan(variant);
      ++*evaluations_;
      if (!planned.ok()) continue;  // above the largest limit
      const Score score = ScoreOf(request_, *planned, true, Status::Ok());
      if (score.fits && Better(score, best_score_)) {
        best_ = SplitPlan{.split = split, .planned = *std::move(planned)};
        best_score_ = score;
      }
    }
  }

  PartitionCandidate Candidate() const {
    PartitionCandidate out{.strategy = std::string(strategy_.name),
                           .stages_per_rank = v_,
                           .status = Status::Ok(),
                           .split = {},
                           .makespan = 0,
                           .peak_memory = 0,
                           .fits = false,
                           .searched = searched_,
                           .exhaustive = exhaustive_,
                           .assumes = {}};
    if (!best_.has_value()) {
      out.status = first_failure_.value_or(InvalidArgument("no split was weighed"));
      return out;
    }
    out.split = best_->split;
    out.makespan = best_score_.makespan;
    out.peak_memory = best_score_.peak;
    out.fits = best_score_.fits;
    if (!out.fits) out.status = best_score_.status;
    out.assumes = Assumes(best_->planned);
    return out;
  }

  const Score& best_score() const { return best_score_; }
  std::optional<SplitPlan>& best() { return best_; }

  // Weighs every split when there are at most `up_to`: the best found is then the best.
  void Enumerate(double up_to) {
    const int layers = static_cast<int>(request_.layers.layers.size());
    const int stages = chain_stages();
    // C(layers - 1, stages - 1) splits, counted in doubles (no overflow at 64 layers).
    double count = 1;
    for (int i = 1; i < stages; ++i) count = count * (layers - stages + i) / i;
    if (count > up_to) return;
    LayerSplit split(static_cast<size_t>(stages), 0);
    const auto place = [&](const auto& self, int k, int from) -> void {
      if (k == stages) {
        Weigh(split);
        return;
      }
      for (int start = from; start <= layers - (stages - k); ++start) {
        split[static_cast<size_t>(k)] = start;
        self(self, k + 1, start + 1);
      }
    };
    place(place, 1, 1);
    exhaustive_ = static_cast<int>(count);
  }

  void NoteFailure(const Status& status) {
    if (!first_failure_.has_value()) first_failure_ = status;
  }

 private:
  // Every split one move away: one boundary anywhere between its neighbours, or a run of
  // neighbouring boundaries together by one layer; every stage keeps at least one layer.
  std::vector<LayerSplit> Neighbours(const LayerSplit& split) const {
    const int layers = static_cast<int>(request_.layers.layers.size());
    const auto valid = [&](const LayerSplit& s) {
      for (size_t k = 1; k < s.size(); ++k) {
        if (s[k] <= s[k - 1]) return false;
      }
      return s.back() < layers;
    };
    std::vector<LayerSplit> out;
    for (size_t k = 1; k < split.size(); ++k) {
      // Boundary k anywhere between its neighbours.
      const int low = split[k - 1] + 1;
      const int high = k + 1 < split.size() ? split[k + 1] - 1 : layers - 1;
      for (int at = low; at <= high; ++at) {
        if (at == split[k]) continue;
        LayerSplit next = split;
        next[k] = at;
        out.push_back(std::move(next));
      }
      // Boundaries k..j together by one: a layer moved across the stages between (how a
      // rank's two stages under V = 2 trade work with stages far from them).
      for (size_t j = k + 1; j < split.size(); ++j) {
        for (const int delta : {-1, 1}) {
          LayerSplit next = split;
          for (size_t i = k; i <= j; ++i) next[i] += delta;
          if (valid(next)) out.push_back(std::move(next));
        }
      }
    }
    return out;
  }

  const PartitionRequest& request_;
  const Strategy& strategy_;
  int v_;
  int* evaluations_;
  std::map<LayerSplit, Score> scores_;
  std::optional<SplitPlan> best_;
  Score best_score_;
  bool searched_ = false;
  int exhaustive_ = 0;
  std::optional<Status> first_failure_;
};

std::vector<double> StageWeights(const LayerCosts& layers) {
  std::vector<double> weights;
  for (const LayerFigures& layer : layers.layers) {
    weights.push_back(*layer.forward + layer.FullBackward());
  }
  return weights;
}

Status CheckRequest(const PartitionRequest& request) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateLayerCosts(request.layers));
  if (request.ranks < 1)
    return InvalidArgument("ranks must be >= 1, got " + std::to_string(request.ranks));
  if (request.microbatches < 1) {
    return InvalidArgument("microbatches must be >= 1, got " +
                           std::to_string(request.microbatches));
  }
  if (!request.memory_limits.empty()) {
    if (request.memory_limits.size() != 1 &&
        request.memory_limits.size() != static_cast<size_t>(request.ranks)) {
      return InvalidArgument("memory limits: give one for every rank or one per rank (" +
                             std::to_string(request.ranks) + "), got " +
                             std::to_string(request.memory_limits.size()));
    }
    for (size_t rank = 0; rank < request.memory_limits.size(); ++rank) {
      const double limit = request.memory_limits[rank];
      if (!(limit > 0) || !std::isfinite(limit)) {
        return InvalidArgument("memory limit" +
                               (request.memory_limits.size() == 1
                                    ? std::string()
                                    : " of rank " + std::to_string(rank)) +
                               " must be a finite number of bytes > 0, got " + FormatNumber(limit));
      }
    }
    if (!request.layers.HasMemory()) {
      return InvalidArgument(
          "a memory limit needs the layers' memory (activation, parameter_bytes, output_bytes "
          "in the layer costs file): none is given");
    }
  }
  if (!std::isfinite(request.link.latency) || request.link.latency < 0) {
    return InvalidArgument("comm must be a finite number >= 0");
  }
  if (request.strategy != "auto" && FindStrategy(request.strategy) == nullptr) {
    return InvalidArgument("unknown strategy '" + request.strategy + "' (one of " +
                           StrategyNames() + ")");
  }
  return Status::Ok();
}

// The strategies and V the request asks for, as searches. `refused` says why one was left
// out: where some had too few layers, the one with the fewest stages (the closest to fitting),
// else the first.
std::vector<SplitSearch> Searches(const PartitionRequest& request, int* evaluations,
                                  Status* refused) {
  int refused_stages = std::numeric_limits<int>::max();
  PlanRequest filter;
  filter.runtime = request.runtime;
  std::vector<const Strategy*> strategies;
  if (request.strategy == "auto") {
    strategies = CandidateStrategies(filter);
  } else {
    strategies.push_back(FindStrategy(request.strategy));
  }
  std::vector<SplitSearch> out;
  const int layers = static_cast<int>(request.layers.layers.size());
  for (const Strategy* strategy : strategies) {
    std::vector<int> vs = StagesPerRankOptions(*strategy);
    if (request.stages_per_rank.has_value()) vs = {*request.stages_per_rank};
    for (const int v : vs) {
      const Topology topology = TopologyOf(request, *strategy, v);
      if (Status applicable = CheckApplicable(*strategy, topology); !applicable.ok()) {
        if (refused->ok()) *refused = applicable;
        continue;
      }
      const int stages = ChainStages(topology);
      if (stages > layers) {
        if (stages < refused_stages) {
          refused_stages = stages;
          *refused = InvalidArgument(std::to_string(layers) + (layers == 1 ? " layer" : " layers") +
                                     " cannot fill the " + std::to_string(stages) + " stages of " +
                                     std::string(strategy->name) +
                                     " at P=" + std::to_string(request.ranks) +
                                     ", V=" + std::to_string(v) + " (each stage needs a layer)");
        }
        continue;
      }
      out.emplace_back(request, *strategy, v, evaluations);
    }
  }
  return out;
}

}  // namespace

LayerSplit MinMaxSplit(const std::vector<double>& weights, int stages) {
  const int n = static_cast<int>(weights.size());
  std::vector<double> prefix(weights.size() + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  const double inf = std::numeric_limits<double>::infinity();
  // cost[k][i]: the smallest largest stage of the first i layers in k stages.
  std::vector<std::vector<double>> cost(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  cost[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = k; i <= n; ++i) {
      for (int j = k - 1; j < i; ++j) {
        const double worst = std::max(cost[k - 1][j], prefix[i] - prefix[j]);
        if (worst < cost[k][i]) {
          cost[k][i] = worst;
          cut[k][i] = j;
        }
      }
    }
  }
  LayerSplit split(stages, 0);
  for (int k = stages, i = n; k >= 1; --k) {
    split[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return split;
}

StatusOr<Evaluated> PlanSplit(const PartitionRequest& request, const std::string& strategy,
                              int stages_per_rank, const LayerSplit& split) {
  const Strategy* found = FindStrategy(strategy);
  if (found == nullptr) return InvalidArgument("unknown strategy '" + strategy + "'");
  PIPEPLAN_ASSIGN_OR_RETURN(
      Evaluated planned, BuildAndSimulatePlan(RequestOf(request, *found, stages_per_rank, split)));
  if (request.memory_limits.size() > 1) {
    double over = 0;
    PIPEPLAN_RETURN_IF_ERROR(CheckRankLimits(request, planned.timeline, &over));
  }
  return planned;
}

StatusOr<PartitionResult> Partition(const PartitionRequest& request) {
  PIPEPLAN_RETURN_IF_ERROR(CheckRequest(request));
  PartitionResult result;
  Status refused = Status::Ok();
  std::vector<SplitSearch> searches = Searches(request, &result.evaluations, &refused);
  if (searches.empty()) return refused;
  const int layers = static_cast<int>(request.layers.layers.size());
  const std::vector<double> weights = StageWeights(request.layers);
  // Every candidate at its starts; the even split's scores kept for the comparison.
  std::vector<Score> even(searches.size());
  std::vector<std::optional<SplitPlan>> even_plans(searches.size());
  for (size_t i = 0; i < searches.size(); ++i) {
    SplitSearch& search = searches[i];
    even[i] = search.Weigh(EvenSplit(layers, search.chain_stages()), &even_plans[i]);
    if (!even[i].status.ok()) search.NoteFailure(even[i].status);
    search.Weigh(MinMaxSplit(weights, search.chain_stages()));
  }
  std::vector<size_t> order(searches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Better(searches[a].best_score(), searches[b].best_score());
  });
  const auto worth_searching = [&](size_t i) {
    if (request.strategy != "auto" || i < kSearched) return true;
    const Score& best = searches[order.front()].best_score();
    const Score& here = searches[order[i]].best_score();
    if (!best.fits || !here.planned) return false;
    if (here.fits) return here.makespan <= best.makespan * (1 + kSearchedWithin);
    // Above the limit at both starts, yet shorter there than the best that fits: another
    // split may bring it within (the descent moves toward fitting first).
    return here.makespan < best.makespan;
  };
  for (size_t i = 0; i < order.size(); ++i) {
    if (!worth_searching(i)) continue;
    SplitSearch& search = searches[order[i]];
    search.Descend(EvenSplit(layers, search.chain_stages()));
    search.Descend(MinMaxSplit(weights, search.chain_stages()));
    search.Enumerate(request.enumerate_up_to);
    search.SweepSettings();
  }

  // Candidates fastest first; the pick the fastest whose step rests on given figures alone.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Better(searches[a].best_score(), searches[b].best_score());
  });
  for (const size_t i : order) result.candidates.push_back(searches[i].Candidate());
  if (!result.candidates.front().fits) return NothingFits(request, result.candidates);
  PickOfCandidates pick = Pick(result.candidates);
  result.pick = pick.index;
  result.notes = std::move(pick.notes);
  SplitSearch& picked = searches[order[result.pick]];
  result.best = *std::move(picked.best());
  if (std::optional<std::string> note = StepEndNote(result.best.planned.plan)) {
    result.notes.push_back(*std::move(note));
  }
  result.even_same = even_plans[order[result.pick]];
  if (result.even_same.has_value() && !even[order[result.pick]].fits) result.even_same.reset();
  // The even split's best strategy, picked as the search's pick is: given figures first.
  std::optional<size_t> even_fastest;
  const auto even_ahead = [&](size_t a, size_t b) {
    const bool a_assumes = !Assumes(even_plans[a]->planned).empty();
    const bool b_assumes = !Assumes(even_plans[b]->planned).empty();
    if (a_assumes != b_assumes) return !a_assumes;
    return Better(even[a], even[b]);
  };
  for (size_t i = 0; i < searches.size(); ++i) {
    if (!even[i].fits || !even_plans[i].has_value()) continue;
    if (!even_fastest.has_value() || even_ahead(i, *even_fastest)) even_fastest = i;
  }
  if (even_fastest.has_value()) result.even_best = std::move(even_plans[*even_fastest]);
  return result;
}

}  // namespace pipeplan
