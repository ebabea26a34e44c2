// V-Half and V-Min ("Pipeline Parallelism with Controllable Memory", Qi et al., NeurIPS 2024;
// docs/strategies.md, "v-half / v-min"). Both are V-shape schedules (V = 2, rank r holds
// chunk 0 = stage r and chunk 1 = stage 2P-1-r) built in three steps:
//   1. Building block: the F, I and W passes of one microbatch on every rank, laid out on unit
//      slots, repeated every six slots (each microbatch brings six passes to every rank). The
//      block's lifespan on a rank fixes how many microbatches it holds at once: (P+2)//2 for
//      v-half and (P+4)//3 for v-min in units of one microbatch through both chunks. W's fill
//      the slots the block leaves free, oldest I first.
//   2. Greedy reordering under the real per-stage costs and transfer times: each rank runs its
//      passes in block order, but while the next one waits for its input it may run a later
//      ready pass (more F's in warm-up, W's in the gaps, I's before W's in cool-down), and an F
//      only when the rank's activation memory, with the rest of its block order still to run,
//      stays within the block's peak. So reordering never raises the peak.
//   3. A few reordering settings are tried (the block order alone among them) and the order
//      with the shortest simulated step is kept.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "building_block.h"
#include "earliest_proposal.h"
#include "future_memory.h"
#include "pipeplan/model/stage_mb_table.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

// Relative slack on the memory cap, for sums of the same figures taken in another order.
constexpr double kMemorySlack = 1e-9;

// Activation memory a pass adds (F, when it starts) or releases (I and W, when they end).
double MemoryChange(const PlanRequest& request, StageId stage, ActionKind kind) {
  return request.memory.Change(kind, stage, request.topology.stages_per_rank);
}

// Which liberties the greedy reordering takes; each combination tried is one candidate order.
struct ReorderSettings {
  bool fill_warmup_and_cooldown = false;  // before a rank's first I and after its last F
  bool fill_steady_phase = false;         // between the two
  bool inputs_before_weights_in_cooldown = false;
};

// The settings tried, best first on ties; the last one keeps the block order as it is.
constexpr std::array<ReorderSettings, 3> kReorderSettings{{
    {true, true, true},
    {true, false, true},
    {false, false, false},
}};
// The order they run in: the block order first, the cheapest (nothing to look ahead at), so
// that its step bounds the other two, which stop as soon as they cannot beat it.
constexpr std::array<size_t, 3> kEvaluationOrder{2, 0, 1};

// Relative slack on that bound: a run stops only when its lower bound exceeds the best step
// by more than the rounding of ~10^8 sums could explain, so stopping never changes the pick.
constexpr double kBoundSlack = 1e-9;

struct CandidateOrder {
  ComputeOrder order;
  double makespan = 0.0;
};

// When the F and the I of one (stage, microbatch) ended, once they have run: what the passes
// that consume them wait for. NaN until the pass ran (end times are finite): 16 bytes per
// entry, not 32, in a table with one per (stage, microbatch) read by every proposal.
struct PassEnds {
  static constexpr double kNotRun = std::numeric_limits<double>::quiet_NaN();
  double forward = kNotRun;
  double input = kNotRun;

  static std::optional<double> IfRun(double end) {
    if (std::isnan(end)) return std::nullopt;
    return end;
  }
};

// F, I, W and B: the kinds a block order holds, as an index.
size_t PassIndex(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return 0;
    case ActionKind::kBackwardInput:
      return 1;
    case ActionKind::kBackwardWeight:
      return 2;
    case ActionKind::kBackward:
    case ActionKind::kOverlapFB:
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      break;
  }
  return 3;
}

// One rank's block order and its progress through it.
struct RankState {
  // `block_order` outlives the state: every reordering setting reads the same one.
  explicit RankState(std::span<const PatternEntry> block_order)
      : pattern(block_order), ran(pattern.size(), 0) {}

  // The passes of one (kind, chunk) in microbatch order, which is also their block order:
  // the j-th pass of a stream is microbatch j (CheckStreams). A greedy step reads its
  // candidates from here alone, not from the pattern: at P=256 every step runs on another
  // rank, whose state is cold, and each line not read is a cache miss saved.
  struct Stream {
    ActionKind kind = ActionKind::kForward;
    int chunk = kDownChunk;
    uint32_t size = 0;
    uint32_t ran = 0;       // passes run, so also the microbatch of the next one
    uint32_t position = 0;  // block position of the next pass, while ran < size
  };

  // The j-th pass of stream k is at block position stream_positions[j * streams.size() + k]:
  // the streams advance together, so a proposal reads its candidates from one cache line.
  // (A vector per stream put them on six pages per rank.) Positions fit 32 bits: requests
  // are capped far below 2^32 passes.
  size_t PositionOf(size_t stream, uint32_t j) const {
    return stream_positions[static_cast<size_t>(j) * streams.size() + stream];
  }

  std::span<const PatternEntry> pattern;
  std::vector<uint8_t> ran;  // per pattern position
  size_t next = 0;           // first position not run yet: the pass the block order wants next
  std::vector<Stream> streams;
  std::vector<uint32_t> stream_positions;
  // Per chunk, its stage and per pass kind (see PassIndex) its cost and memory change:
  // looked up once, read by every greedy step.
  struct PassFacts {
    double cost = 0.0;
    double change = 0.0;
  };
  std::array<StageId, 2> stage_of_chunk{};
  std::array<std::array<PassFacts, 4>, 2> facts{};
  const PassFacts& FactsOf(const PatternEntry& entry) const {
    return facts[entry.chunk][PassIndex(entry.kind)];
  }
  FutureMemory future;  // empty when the settings never run a pass ahead
  double held = 0.0;    // activation memory held now
  double free_at = 0.0;
  // Cost of the passes not run yet: the rank ends at free_at + this or later.
  double work_left = 0.0;
  int forwards_left = 0;
  bool ran_input = false;
  std::vector<uint32_t> order;  // positions in the order they ran
};

// A rank's choice for its next pass: the stream whose next pass it is, and when it can start.
struct Proposal {
  size_t stream = 0;
  double start = 0.0;
};

// Runs every rank through its block order under the real costs, reordering as the settings
// allow, and records the order each rank ran.
class GreedyReorder {
 public:
  GreedyReorder(const PlanRequest& request, const StageMap& stages,
                const std::vector<std::vector<PatternEntry>>& patterns, double memory_cap,
                ReorderSettings settings)
      : request_(request),
        stages_(stages),
        settings_(settings),
        memory_cap_(memory_cap),
        ends_(stages.num_stages(), request.topology.microbatches, PassEnds{}) {
    ranks_.reserve(patterns.size());
    for (size_t rank = 0; rank < patterns.size(); ++rank) {
      ranks_.push_back(MakeRankState(RankId(static_cast<int>(rank)), patterns[rank]));
    }
  }

  // The candidate order, or nullopt once its step is sure to be longer than `bound`: some rank
  // that still has `work_left` to run from `free_at` would end after it.
  StatusOr<std::optional<CandidateOrder>> Run(double bound) {
    size_t total = 0;
    for (const RankState& rank : ranks_) total += rank.pattern.size();
    std::vector<std::optional<Proposal>> proposals(ranks_.size());
    EarliestProposal queue(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      proposals[r] = Propose(r);
      if (proposals[r].has_value()) queue.Set(r, proposals[r]->start);
    }
    double makespan = 0.0;
    for (size_t step = 0; step < total; ++step) {
      const std::optional<size_t> earliest = queue.Earliest();
      if (!earliest.has_value()) return Stalled();
      const size_t r = *earliest;
      const Proposal chosen = *proposals[r];
      makespan = std::max(makespan, RunPass(r, chosen));
      if (ranks_[r].free_at + ranks_[r].work_left > bound) {
        return std::optional<CandidateOrder>();
      }
      for (const size_t stale : RanksToRefresh(r, chosen.stream)) {
        proposals[stale] = Propose(stale);
        if (proposals[stale].has_value()) {
          queue.Set(stale, proposals[stale]->start);
        } else {
          queue.Clear(stale);
        }
      }
    }
    CandidateOrder result;
    result.makespan = makespan;
    for (size_t r = 0; r < ranks_.size(); ++r) result.order.push_back(ActionsOf(r));
    return std::optional<CandidateOrder>(std::move(result));
  }

 private:
  enum class Phase : uint8_t { kWarmup, kSteady, kCooldown };

  RankState MakeRankState(RankId rank, const std::vector<PatternEntry>& pattern) const {
    RankState state(pattern);
    for (const int chunk : {kDownChunk, kUpChunk}) {
      const StageId stage = stages_.StagesOf(rank)[static_cast<size_t>(chunk)];
      state.stage_of_chunk[chunk] = stage;
      for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackwardInput,
                                    ActionKind::kBackwardWeight, ActionKind::kBackward}) {
        state.facts[chunk][PassIndex(kind)] = {
            request_.costs.ComputeTime(MakeCompute(kind, stage, MicrobatchId(0))),
            MemoryChange(request_, stage, kind)};
      }
    }
    if (RunsAhead()) state.future = FutureMemory(MemoryChanges(state));
    std::vector<size_t> stream_of(pattern.size());
    uint32_t longest = 0;
    for (size_t position = 0; position < pattern.size(); ++position) {
      const PatternEntry& entry = pattern[position];
      if (entry.kind == ActionKind::kForward) ++state.forwards_left;
      state.work_left += state.FactsOf(entry).cost;
      auto stream =
          std::find_if(state.streams.begin(), state.streams.end(), [&](const RankState::Stream& s) {
            return s.kind == entry.kind && s.chunk == entry.chunk;
          });
      if (stream == state.streams.end()) {
        state.streams.push_back({entry.kind, entry.chunk, 0, 0});
        stream = std::prev(state.streams.end());
      }
      stream_of[position] = static_cast<size_t>(stream - state.streams.begin());
      longest = std::max(longest, ++stream->size);
    }
    state.stream_positions.resize(static_cast<size_t>(longest) * state.streams.size());
    std::vector<uint32_t> filled(state.streams.size(), 0);
    for (size_t position = 0; position < pattern.size(); ++position) {
      const size_t k = stream_of[position];
      state.stream_positions[static_cast<size_t>(filled[k]++) * state.streams.size() + k] =
          static_cast<uint32_t>(position);
    }
    for (size_t k = 0; k < state.streams.size(); ++k) {
      state.streams[k].position = state.PositionOf(k, 0);
    }
    return state;
  }

  static std::vector<double> MemoryChanges(const RankState& rank) {
    std::vector<double> changes;
    changes.reserve(rank.pattern.size());
    for (const PatternEntry& entry : rank.pattern) changes.push_back(rank.FactsOf(entry).change);
    return changes;
  }

  StageId StageOf(RankId rank, const PatternEntry& entry) const {
    return ranks_[static_cast<size_t>(rank.value)].stage_of_chunk[entry.chunk];
  }
  StageId StageOf(RankId rank, const RankState::Stream& stream) const {
    return ranks_[static_cast<size_t>(rank.value)].stage_of_chunk[stream.chunk];
  }

  Phase PhaseOf(const RankState& rank) const {
    if (!rank.ran_input) return Phase::kWarmup;
    return rank.forwards_left > 0 ? Phase::kSteady : Phase::kCooldown;
  }

  // Only a pass run ahead of the block order needs the rank's future memory.
  bool RunsAhead() const {
    return settings_.fill_warmup_and_cooldown || settings_.fill_steady_phase;
  }

  bool MayRunAhead(Phase phase) const {
    switch (phase) {
      case Phase::kWarmup:
      case Phase::kCooldown:
        return settings_.fill_warmup_and_cooldown;
      case Phase::kSteady:
        return settings_.fill_steady_phase;
    }
    return false;
  }

  // Order among passes that can start at the same time: the block order (the pattern is in
  // slot order), except that in cool-down (if the settings say so) I's, which others wait
  // for, go before W's.
  std::pair<int, size_t> Priority(const RankState& rank, ActionKind kind, size_t position) const {
    const bool deferred = settings_.inputs_before_weights_in_cooldown &&
                          PhaseOf(rank) == Phase::kCooldown && kind == ActionKind::kBackwardWeight;
    return {deferred ? 1 : 0, position};
  }

  // When the inputs of the next pass of `stream` are there; nullopt while a producer has not
  // run.
  std::optional<double> InputsReady(RankId rank, const RankState::Stream& stream) const {
    const StageId stage = StageOf(rank, stream);
    const MicrobatchId mb(static_cast<int>(stream.ran));
    const PassEnds& own = ends_.At(stage, mb);
    switch (stream.kind) {
      case ActionKind::kForward:
        if (stages_.IsFirst(stage)) return 0.0;
        return Arrival(PassEnds::IfRun(ends_.At(StageId(stage.value - 1), mb).forward),
                       StageId(stage.value - 1), stage);
      case ActionKind::kBackwardInput: {
        const std::optional<double> forward = PassEnds::IfRun(own.forward);
        if (!forward.has_value()) return std::nullopt;
        if (stages_.IsLast(stage)) return *forward;
        const std::optional<double> gradient =
            Arrival(PassEnds::IfRun(ends_.At(StageId(stage.value + 1), mb).input),
                    StageId(stage.value + 1), stage);
        if (!gradient.has_value()) return std::nullopt;
        return std::max(*forward, *gradient);
      }
      case ActionKind::kBackwardWeight:
        return PassEnds::IfRun(own.input);
      case ActionKind::kBackward:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return std::nullopt;  // not in these schedules
    }
    return std::nullopt;
  }

  // When the output of `from` (ended at `end`, if it ran) is usable by `to`.
  std::optional<double> Arrival(std::optional<double> end, StageId from, StageId to) const {
    if (!end.has_value()) return std::nullopt;
    if (stages_.RankOf(from) == stages_.RankOf(to)) return *end;
    return *end + request_.costs.TransferTime(from, to);
  }

  // Running the F at `position` now keeps the rank within the cap even if the rest of its
  // block order then runs as is.
  bool ForwardFits(const RankState& rank, size_t position, int chunk) const {
    const double peak = rank.held + rank.facts[chunk][PassIndex(ActionKind::kForward)].change +
                        rank.future.RiseWithout(position);
    return peak <= memory_cap_ * (1 + kMemorySlack) + kMemorySlack;
  }

  // The pass the rank runs next and when: among the passes it may run, those that can start
  // earliest, and of those the first by priority. The block order's next pass is always
  // allowed, so some rank always has a proposal until every pass ran.
  std::optional<Proposal> Propose(size_t r) {
    RankState& rank = ranks_[r];
    const RankId rank_id(static_cast<int>(r));
    const bool may_run_ahead = MayRunAhead(PhaseOf(rank));
    std::optional<Proposal> best;
    std::pair<int, size_t> best_priority;
    for (size_t k = 0; k < rank.streams.size(); ++k) {
      const RankState::Stream& stream = rank.streams[k];
      if (stream.ran >= stream.size) continue;
      const size_t position = stream.position;
      const bool ahead = position != rank.next;
      if (ahead && !may_run_ahead) continue;
      const std::optional<double> ready = InputsReady(rank_id, stream);
      if (!ready.has_value()) continue;
      if (ahead && stream.kind == ActionKind::kForward &&
          !ForwardFits(rank, position, stream.chunk)) {
        continue;
      }
      const double start = std::max(rank.free_at, *ready);
      const std::pair<int, size_t> priority = Priority(rank, stream.kind, position);
      const bool better = !best.has_value() || start < best->start ||
                          (start == best->start && priority < best_priority);
      if (better) {
        best = Proposal{k, start};
        best_priority = priority;
      }
    }
    return best;
  }

  // Runs the proposed pass on rank r; returns its end.
  double RunPass(size_t r, const Proposal& proposal) {
    RankState& rank = ranks_[r];
    RankState::Stream& stream = rank.streams[proposal.stream];
    const StageId stage = rank.stage_of_chunk[stream.chunk];
    const MicrobatchId mb(static_cast<int>(stream.ran));
    const RankState::PassFacts& facts = rank.facts[stream.chunk][PassIndex(stream.kind)];
    const double end = proposal.start + facts.cost;
    switch (stream.kind) {
      case ActionKind::kForward:
        ends_.At(stage, mb).forward = end;
        --rank.forwards_left;
        break;
      case ActionKind::kBackwardInput:
        ends_.At(stage, mb).input = end;
        rank.ran_input = true;
        break;
      case ActionKind::kBackwardWeight:
      case ActionKind::kBackward:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        break;
    }
    rank.held += facts.change;
    const size_t position = stream.position;
    if (RunsAhead()) rank.future.Remove(position);
    rank.ran[position] = 1;
    while (rank.next < rank.ran.size() && rank.ran[rank.next] != 0) ++rank.next;
    if (++stream.ran < stream.size) {
      stream.position = rank.PositionOf(proposal.stream, stream.ran);
    }
    rank.free_at = end;
    rank.work_left -= facts.cost;
    rank.order.push_back(static_cast<uint32_t>(position));
    return end;
  }

  // At most two ranks, without allocating: this runs once per greedy step.
  class RankList {
   public:
    void push_back(size_t rank) { ranks_[size_++] = rank; }
    const size_t* begin() const { return ranks_.data(); }
    const size_t* end() const { return ranks_.data() + size_; }

   private:
    std::array<size_t, 2> ranks_{};
    size_t size_ = 0;
  };

  // The ranks whose proposals the pass just run on rank r can change: r itself, and the rank
  // of the pass that consumes its output on another rank. An F feeds the F of the next stage,
  // an I the I of the previous stage (the I and W of its own stage are on r), a W nothing.
  // Every other rank's proposal reads nothing the pass wrote, so it stands.
  RankList RanksToRefresh(size_t r, size_t stream) const {
    const RankState::Stream& pass = ranks_[r].streams[stream];
    const StageId stage = StageOf(RankId(static_cast<int>(r)), pass);
    RankList ranks;
    ranks.push_back(r);
    std::optional<StageId> consumer;
    if (pass.kind == ActionKind::kForward && !stages_.IsLast(stage)) {
      consumer = StageId(stage.value + 1);
    }
    if (pass.kind == ActionKind::kBackwardInput && !stages_.IsFirst(stage)) {
      consumer = StageId(stage.value - 1);
    }
    if (consumer.has_value()) {
      const auto consumer_rank = static_cast<size_t>(stages_.RankOf(*consumer).value);
      if (consumer_rank != r) ranks.push_back(consumer_rank);
    }
    return ranks;
  }

  std::vector<Action> ActionsOf(size_t r) const {
    const RankState& rank = ranks_[r];
    const RankId rank_id(static_cast<int>(r));
    std::vector<Action> actions;
    actions.reserve(rank.order.size());
    for (const size_t position : rank.order) {
      const PatternEntry& entry = rank.pattern[position];
      actions.push_back(
          MakeCompute(entry.kind, StageOf(rank_id, entry), MicrobatchId(entry.microbatch)));
    }
    return actions;
  }

  Status Stalled() const {
    std::string waiting;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const RankState& rank = ranks_[r];
      if (rank.next >= rank.pattern.size()) continue;
      const PatternEntry& entry = rank.pattern[rank.next];
      if (!waiting.empty()) waiting += ", ";
      waiting += "rank " + std::to_string(r) + " at " +
                 ToString(MakeCompute(entry.kind, StageOf(RankId(static_cast<int>(r)), entry),
                                      MicrobatchId(entry.microbatch)));
    }
    return Internal("controllable-memory reordering stalled (" + waiting + ")");
  }

  const PlanRequest& request_;
  const StageMap& stages_;
  ReorderSettings settings_;
  double memory_cap_;
  // Microbatch-major: a pass reads its own stage's entry and a neighbour stage's for the same
  // microbatch, which then share a cache line.
  StageMbTable<PassEnds, TableOrder::kMicrobatchMajor> ends_;
  std::vector<RankState> ranks_;
};

// Peak activation memory of a rank running `pattern` in order (F adds when it starts, I and W
// release when they end): the cap the reordering keeps to.
double PeakOf(const PlanRequest& request, const StageMap& stages, RankId rank,
              const std::vector<PatternEntry>& pattern) {
  double held = 0.0;
  double peak = 0.0;
  for (const PatternEntry& entry : pattern) {
    held +=
        MemoryChange(request, stages.StagesOf(rank)[static_cast<size_t>(entry.chunk)], entry.kind);
    peak = std::max(peak, held);
  }
  return peak;
}

// The greedy reads a pass's microbatch from its stream's progress: in each rank's block
// order the passes of every (kind, chunk) must be microbatches 0, 1, 2, ... in turn.
Status CheckStreams(const std::vector<std::vector<PatternEntry>>& patterns) {
  for (size_t rank = 0; rank < patterns.size(); ++rank) {
    // Next microbatch per (pass kind, chunk).
    std::array<std::array<int, 2>, 4> next{};
    for (const PatternEntry& entry : patterns[rank]) {
      int& expected = next[PassIndex(entry.kind)][static_cast<size_t>(entry.chunk)];
      if (entry.microbatch != expected) {
        return Internal("controllable-memory block order of rank " + std::to_string(rank) +
                        " has microbatch " + std::to_string(entry.microbatch) + " where " +
                        std::to_string(expected) + " was due");
      }
      ++expected;
    }
  }
  return Status::Ok();
}

StatusOr<ComputeOrder> GenerateControllableMemory(const PlanRequest& request,
                                                  const StageMap& stages, const BlockShape& shape) {
  const Topology& topology = request.topology;
  if (topology.placement != Placement::kVShape || topology.stages_per_rank != 2) {
    return InvalidArgument(std::string(shape.name) +
                           " needs the V placement with 2 stages per rank, got placement " +
                           std::string(PlacementName(topology.placement)) + " with " +
                           std::to_string(topology.stages_per_rank));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const BuildingBlock block, BuildingBlock::Solve(shape, stages));
  std::vector<std::vector<PatternEntry>> patterns;
  double memory_cap = 0.0;
  for (int r = 0; r < stages.num_ranks(); ++r) {
    patterns.push_back(block.RepeatOn(RankId(r), topology.microbatches));
    memory_cap = std::max(memory_cap, PeakOf(request, stages, RankId(r), patterns.back()));
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckStreams(patterns));
  // The shortest step wins; on a tie the setting listed first in kReorderSettings.
  std::optional<CandidateOrder> best;
  size_t best_setting = 0;
  for (const size_t setting : kEvaluationOrder) {
    const double bound =
        best.has_value() ? best->makespan + kBoundSlack * std::max(1.0, std::abs(best->makespan))
                         : std::numeric_limits<double>::infinity();
    GreedyReorder reorder(request, stages, patterns, memory_cap, kReorderSettings[setting]);
    PIPEPLAN_ASSIGN_OR_RETURN(std::optional<CandidateOrder> candidate, reorder.Run(bound));
    if (!candidate.has_value()) continue;
    const bool better = !best.has_value() || candidate->makespan < best->makespan ||
                        (candidate->makespan == best->makespan && setting < best_setting);
    if (better) {
      best = std::move(candidate);
      best_setting = setting;
    }
  }
  return std::move(best->order);
}

}  // namespace

StatusOr<ComputeOrder> GenerateVHalf(const PlanRequest& request, const StageMap& stages) {
  return GenerateControllableMemory(request, stages, kVHalfShape);
}

StatusOr<ComputeOrder> GenerateVMin(const PlanRequest& request, const StageMap& stages) {
  return GenerateControllableMemory(request, stages, kVMinShape);
}

}  // namespace pipeplan::strategies
