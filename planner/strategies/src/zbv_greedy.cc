// ZB-V greedy: the zero-bubble V-shape heuristic under a memory limit, with the semantics of
// the reference PipelineGraph.try_v_schedule / get_v_schedule (seed 001_efdd2fa0a0a29e03).
// Rank r holds chunk 0 = stage r (the way down the V) and chunk 1 = stage 2P-1-r (the way
// back); the turn on rank P-1 is local and free. One pass builds every rank's order while it
// keeps the time each action would end (per-stage costs, transfers between ranks):
//   warm-up  microbatch 0 forward down the V and back; before the returning activation
//            arrives, extra chunk-0 forwards on the ranks up to r while rank r keeps room
//            for r+1 more forwards of each chunk; then forwards that leave each rank with
//            more work (and more chunk-1 forwards) than the rank before it;
//   steady   per step, every rank runs one I (chunk 1 unless chunk 0 is behind it and ready)
//            and at most one F (chunk 1 when its input is there, else chunk 0); before each,
//            the W's that fit into the wait for its input, one more W when the wait exceeds
//            the bubble the rank may still take, and the W's that keep F under the limit;
//   drain    the remaining W's.
// Refinement passes re-run with each rank's bubble as its approved bubble while the largest
// bubble keeps falling; the best of the four fill settings wins (first one on ties). All
// passes share their start up to the first idle-time question (SharedStart).
//
// Where the reference stops on an assertion (memory below about 2P chunk activations), a
// forward or input that is not ready or does not fit is skipped for the step instead; where
// the reference succeeds, nothing is ever skipped, so the orders are identical. A pass fails
// only when a whole step can place nothing: then the limit is reported as too small, with
// the smallest one (in whole chunk activations) that works.
#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/model/text_format.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

constexpr int kDownChunk = 0;  // stage r
constexpr int kBackChunk = 1;  // stage 2P-1-r
constexpr double kNotPlaced = -1.0;
// Relative slack on the memory limit, the same as the planner's own limit check.
constexpr double kLimitTolerance = 1e-12;
// Refinement passes stop when the largest bubble stops falling; this only bounds the chain.
constexpr int kMaxPasses = 64;

// Where the input of an action comes from, and what it costs to get it here.
struct Upstream {
  StageId stage;
  ActionKind kind = ActionKind::kForward;  // kForward or kBackwardInput
  double transfer = 0.0;                   // 0 on the same rank
  bool cross_rank = false;                 // only waits for another rank are filled with W's
};

struct ChunkModel {
  StageId stage;
  double forward = 0.0;  // costs of F, I and W on this stage
  double input = 0.0;
  double weight = 0.0;
  double activation = 0.0;               // added by F
  double freed_by_input = 0.0;           // released by I
  double freed_by_weight = 0.0;          // released by W (the rest)
  std::optional<Upstream> forward_from;  // F of the previous stage (none on stage 0)
  Upstream input_from;  // I of the next stage, or this stage's own F on the last stage
};

struct ZbvModel {
  int ranks = 0;
  int microbatches = 0;
  int num_stages = 0;
  double static_memory = 0.0;
  std::vector<std::array<ChunkModel, 2>> chunks;  // [rank][chunk]
  std::vector<double> limit;                      // per rank: static + activations
};

// The reference's fill_b / fill_f: allow one W more than fits into the wait before an I on
// chunk 1 / before an F, when the wait exceeds the bubble the rank may still take. (Before
// an I on chunk 0 that W is always allowed.)
struct FillSettings {
  bool before_input = true;
  bool before_forward = true;
};

// Which rule decides on that one W more.
enum class ExtraWeight : uint8_t { kAlways, kIfBeforeInput, kIfBeforeForward };

struct PlannedOp {
  ActionKind kind = ActionKind::kForward;
  uint8_t chunk = 0;
  int32_t microbatch = 0;
};

struct PendingWeight {
  int chunk = 0;
  int microbatch = 0;
};

// The W's a rank owes, oldest I first: a queue that only grows (2M entries at most).
class WeightQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  const PendingWeight& front() const { return items_[head_]; }
  void Push(PendingWeight weight) { items_.push_back(weight); }
  PendingWeight Pop() { return items_[head_++]; }
  void Reserve(size_t size) { items_.reserve(size); }

 private:
  std::vector<PendingWeight> items_;
  size_t head_ = 0;
};

struct PassResult {
  std::vector<std::vector<PlannedOp>> order;  // [rank]
  std::vector<double> bubble;                 // [rank]: idle time after its first forward
  double max_bubble = 0.0;
};

// Which fill settings a run of passes actually consulted (with the extra W otherwise due).
// A run with the other value of an unconsulted setting is the same run, so it is skipped.
struct SettingsUsed {
  bool before_input = false;
  bool before_forward = false;
};

struct RankState {
  double clock = 0.0;   // end of the last action placed
  double held = 0.0;    // activation memory held
  double bubble = 0.0;  // idle time since the first chunk-0 forward
  std::array<int, 2> forwards{};
  std::array<int, 2> inputs{};
  WeightQueue pending;
  std::vector<PlannedOp> order;
};

// Everything a pass changes as it places work: a copy taken between two steps resumes it.
// The passes of one search take turns on one PassState, so its tables are allocated once.
struct PassState {
  explicit PassState(const ZbvModel& model)
      : forward_end(model.num_stages, model.microbatches, kNotPlaced),
        input_end(model.num_stages, model.microbatches, kNotPlaced) {
    Reset(model);
  }

  // Back to an empty pass of `model` (the one it was made for).
  void Reset(const ZbvModel& model) {
    ranks.assign(static_cast<size_t>(model.ranks), RankState{});
    forward_end.Fill(kNotPlaced);
    input_end.Fill(kNotPlaced);
    inputs_left = static_cast<long>(model.ranks) * 2 * model.microbatches;
    placed = 0;
    max_bubble = 0.0;
  }

  std::vector<RankState> ranks;
  StageMbTable<double> forward_end;
  StageMbTable<double> input_end;
  long inputs_left = 0;
  long placed = 0;
  double max_bubble = 0.0;
};

// A pass depends on its fill settings and approved bubbles only from the first time it asks
// how much idle time a rank may take (every setting is consulted after that question); up to
// there every pass of the search is the same. So the search's first pass keeps a copy of its
// state every sixteenth of a pass until it first asks, and every later pass resumes from the
// last copy instead of starting over (reusing the last copy's storage). On the budget case
// (P=32, M=256) the first question comes at placement 42,207 of 49,152 in all eight passes.
class SharedStart {
 public:
  explicit SharedStart(const ZbvModel& model)
      : interval_(std::max(1L, static_cast<long>(model.ranks) * model.microbatches * 6 / 16)) {}

  // `asked`: whether the pass has asked about idle time yet.
  void Offer(const PassState& state, bool asked) {
    if (asked || state.placed < next_) return;
    if (saved_.has_value()) {
      *saved_ = state;  // reuses the copy's storage
    } else {
      saved_.emplace(state);
    }
    next_ = state.placed + interval_;
  }
  const std::optional<PassState>& saved() const { return saved_; }

 private:
  long interval_;
  long next_ = 0;
  std::optional<PassState> saved_;
};

// One greedy pass (the reference's try_v_schedule without its recursion).
class ZbvBuilder {
 public:
  // Runs on `state`: empty (Reset) for a new pass, or a copy of one another pass reached
  // before it first asked about idle time, to resume that pass under this one's settings.
  ZbvBuilder(const ZbvModel& model, FillSettings fill, const std::vector<double>& approved,
             SettingsUsed& used, PassState& state)
      : model_(model),
        fill_(fill),
        used_(used),
        approved_(approved),
        max_approved_(*std::max_element(approved.begin(), approved.end())),
        state_(state),
        input_choice_(static_cast<size_t>(model.ranks)) {
    for (RankState& rank : state_.ranks) {
      rank.order.reserve(6 * static_cast<size_t>(model.microbatches));  // F, I, W per chunk
      rank.pending.Reserve(2 * static_cast<size_t>(model.microbatches));
    }
  }

  // Empty when a step could place nothing (the memory limit is too small).
  // `shared`, when given, keeps copies of the state taken between steps until the pass first
  // asks how much idle time a rank may take.
  std::optional<PassResult> Run(SharedStart* shared = nullptr) && {
    if (state_.placed == 0) {  // a resumed pass is past the warm-up
      ForwardFirstMicrobatch();
      StartReturnLeg();
      StaggerForwards();
    }
    while (state_.inputs_left > 0) {
      if (shared != nullptr) shared->Offer(state_, asked_);
      if (!SteadyStep()) return std::nullopt;
    }
    for (int rank = 0; rank < model_.ranks; ++rank) {
      while (!state_.ranks[rank].pending.empty()) PutWeight(rank);
    }
    PassResult result;
    result.max_bubble = state_.max_bubble;
    for (RankState& rank : state_.ranks) {
      result.bubble.push_back(rank.bubble);
      result.order.push_back(std::move(rank.order));
    }
    return result;
  }

 private:
  const ChunkModel& Chunk(int rank, int chunk) const { return model_.chunks[rank][chunk]; }
  int M() const { return model_.microbatches; }

  // --- warm-up ---------------------------------------------------------------------------

  void ForwardFirstMicrobatch() {
    for (int rank = 0; rank < model_.ranks; ++rank) {
      if (CanForward(rank, kDownChunk)) PutForward(rank, kDownChunk);
    }
  }

  // From the last rank back to rank 0: the back-chunk forward of microbatch 0, preceded on
  // rank r by chunk-0 forwards (on ranks 0..r) that end before its input arrives.
  void StartReturnLeg() {
    const int last = model_.ranks - 1;
    for (int rank = last; rank >= 0; --rank) {
      if (rank < last) RunAheadOnDownChunk(rank);
      if (CanForward(rank, kBackChunk)) PutForward(rank, kBackChunk);
    }
  }

  void RunAheadOnDownChunk(int rank) {
    const ChunkModel& back = Chunk(rank, kBackChunk);
    const ChunkModel& down = Chunk(rank, kDownChunk);
    assert(back.forward_from.has_value());
    if (!IsPlaced(*back.forward_from, 0)) return;
    const double arrival = ArrivalOf(*back.forward_from, 0);
    const double reserve = (rank + 1) * (down.activation + back.activation);
    RankState& state = state_.ranks[rank];
    while (WithinLimit(rank, state.held + reserve) && state.clock + down.forward <= arrival &&
           state.forwards[kDownChunk] < M()) {
      const int before = state.forwards[kDownChunk];
      for (int feeder = 0; feeder <= rank; ++feeder) {
        if (CanForward(feeder, kDownChunk)) PutForward(feeder, kDownChunk);
      }
      if (state.forwards[kDownChunk] == before) return;
    }
  }

  // Rank r (from 1 up) takes forwards until it has no less work than rank r-1 and more
  // back-chunk forwards; each sweep runs one chunk on ranks P-1 down to r, and the chunk
  // alternates across the whole phase.
  void StaggerForwards() {
    int chunk = kDownChunk;
    for (int rank = 1; rank < model_.ranks; ++rank) {
      int stalled_sweeps = 0;
      while (LagsBehindPrevious(rank) && stalled_sweeps < 2) {
        const int before = state_.ranks[rank].forwards[chunk];
        for (int other = model_.ranks - 1; other >= rank; --other) {
          if (CanForward(other, chunk)) PutForward(other, chunk);
        }
        stalled_sweeps = state_.ranks[rank].forwards[chunk] == before ? stalled_sweeps + 1 : 0;
        chunk = 1 - chunk;
      }
    }
  }

  bool LagsBehindPrevious(int rank) const {
    const RankState& self = state_.ranks[rank];
    const RankState& previous = state_.ranks[rank - 1];
    const int own = self.forwards[kDownChunk] + self.forwards[kBackChunk];
    const int ahead = previous.forwards[kDownChunk] + previous.forwards[kBackChunk];
    return own < ahead || (self.forwards[kBackChunk] <= previous.forwards[kBackChunk] &&
                           previous.forwards[kBackChunk] < M());
  }

  // --- steady state ----------------------------------------------------------------------

  // False when nothing at all could be placed (the same state would repeat forever).
  bool SteadyStep() {
    const long before = state_.placed;
    PlaceInputs();
    PlaceForwards();
    return state_.placed != before;
  }

  // Chunks are chosen from the state before the step; then the chunk-0 inputs run from the
  // last rank down (each feeds the one below), then the back-chunk inputs from rank 0 up.
  void PlaceInputs() {
    for (int rank = 0; rank < model_.ranks; ++rank) input_choice_[rank] = ChooseInputChunk(rank);
    for (int rank = model_.ranks - 1; rank >= 0; --rank) {
      if (input_choice_[rank] == kDownChunk) PlaceInput(rank, kDownChunk);
    }
    for (int rank = 0; rank < model_.ranks; ++rank) {
      if (input_choice_[rank] == kBackChunk) PlaceInput(rank, kBackChunk);
    }
  }

  // The back chunk's I leads; chunk 0 goes when it is behind and its input is there (or the
  // back chunk is done). None when the rank has no I left.
  std::optional<int> ChooseInputChunk(int rank) const {
    const RankState& state = state_.ranks[rank];
    if (state.inputs[kDownChunk] + state.inputs[kBackChunk] >= 2 * M()) return std::nullopt;
    if (state.inputs[kDownChunk] >= state.inputs[kBackChunk]) return kBackChunk;
    if (state.inputs[kBackChunk] >= M() ||
        IsPlaced(Chunk(rank, kDownChunk).input_from, state.inputs[kDownChunk])) {
      return kDownChunk;
    }
    return kBackChunk;
  }

  void PlaceInput(int rank, int chunk) {
    const int mb = state_.ranks[rank].inputs[chunk];
    const Upstream& from = Chunk(rank, chunk).input_from;
    if (mb >= M() || !IsPlaced(from, mb)) return;  // the reference would stop here
    const ExtraWeight extra =
        chunk == kDownChunk ? ExtraWeight::kAlways : ExtraWeight::kIfBeforeInput;
    FillWait(rank, from, mb, extra);
    PutInput(rank, chunk);
  }

  void PlaceForwards() {
    for (int rank = 0; rank < model_.ranks; ++rank) {
      const std::optional<int> chunk = ChooseForwardChunk(rank);
      if (!chunk.has_value() || !ForwardReady(rank, *chunk)) continue;
      if (!MakeRoomForForward(rank, *chunk)) continue;
      const std::optional<Upstream>& from = Chunk(rank, *chunk).forward_from;
      if (from.has_value()) {
        FillWait(rank, *from, state_.ranks[rank].forwards[*chunk], ExtraWeight::kIfBeforeForward);
      }
      PutForward(rank, *chunk);
    }
  }

  // The back chunk when its input is there, else chunk 0 when its input is there; chunk 0
  // whenever the back chunk has caught up with it.
  std::optional<int> ChooseForwardChunk(int rank) const {
    const RankState& state = state_.ranks[rank];
    const int down = state.forwards[kDownChunk];
    const int back = state.forwards[kBackChunk];
    if (back >= M()) return std::nullopt;
    if (back >= down) return kDownChunk;
    if (ForwardReady(rank, kBackChunk)) return kBackChunk;
    if (down < M() && ForwardReady(rank, kDownChunk)) return kDownChunk;
    return std::nullopt;
  }

  // W's (oldest first) until the forward's activation fits; false if it still does not.
  bool MakeRoomForForward(int rank, int chunk) {
    RankState& state = state_.ranks[rank];
    const double activation = Chunk(rank, chunk).activation;
    while (!WithinLimit(rank, state.held + activation) && !state.pending.empty()) PutWeight(rank);
    return WithinLimit(rank, state.held + activation);
  }

  // Before waiting for another rank: every W that ends before the input arrives, then one
  // more if allowed and the remaining wait exceeds the bubble the rank may still take.
  void FillWait(int rank, const Upstream& from, int mb, ExtraWeight extra) {
    if (!from.cross_rank) return;
    const double arrival = ArrivalOf(from, mb);
    RankState& state = state_.ranks[rank];
    while (!state.pending.empty() &&
           arrival >= state.clock + Chunk(rank, state.pending.front().chunk).weight) {
      PutWeight(rank);
    }
    if (state.pending.empty() || arrival - state.clock <= AllowedBubble(rank)) return;
    if (ExtraWeightAllowed(extra)) PutWeight(rank);
  }

  // Records that the answer depended on a fill setting.
  bool ExtraWeightAllowed(ExtraWeight extra) {
    switch (extra) {
      case ExtraWeight::kAlways:
        return true;
      case ExtraWeight::kIfBeforeInput:
        used_.before_input = true;
        return fill_.before_input;
      case ExtraWeight::kIfBeforeForward:
        used_.before_forward = true;
        return fill_.before_forward;
    }
    return true;
  }

  // How much more idle time the rank may take: the largest bubble so far (or, in a
  // refinement pass, what others were approved beyond this rank) minus its own.
  double AllowedBubble(int rank) {
    asked_ = true;
    const double approved_slack = max_approved_ - approved_[rank];
    return std::max(state_.max_bubble, approved_slack) - state_.ranks[rank].bubble;
  }

  // --- readiness and memory --------------------------------------------------------------

  bool IsPlaced(const Upstream& from, int mb) const { return EndOf(from, mb) >= 0; }
  double ArrivalOf(const Upstream& from, int mb) const { return EndOf(from, mb) + from.transfer; }
  double EndOf(const Upstream& from, int mb) const {
    const StageMbTable<double>& table =
        from.kind == ActionKind::kForward ? state_.forward_end : state_.input_end;
    return table.At(from.stage, MicrobatchId(mb));
  }

  bool ForwardReady(int rank, int chunk) const {
    const int mb = state_.ranks[rank].forwards[chunk];
    if (mb >= M()) return false;
    const std::optional<Upstream>& from = Chunk(rank, chunk).forward_from;
    return !from.has_value() || IsPlaced(*from, mb);
  }

  bool CanForward(int rank, int chunk) const {
    return ForwardReady(rank, chunk) &&
           WithinLimit(rank, state_.ranks[rank].held + Chunk(rank, chunk).activation);
  }

  bool WithinLimit(int rank, double activations) const {
    const double limit = model_.limit[rank];
    return model_.static_memory + activations <= limit + std::abs(limit) * kLimitTolerance;
  }

  // --- placing ---------------------------------------------------------------------------

  void PutForward(int rank, int chunk) {
    RankState& state = state_.ranks[rank];
    const ChunkModel& model = Chunk(rank, chunk);
    const int mb = state.forwards[chunk];
    const double ready = model.forward_from.has_value() ? ArrivalOf(*model.forward_from, mb) : 0.0;
    state_.forward_end.At(model.stage, MicrobatchId(mb)) =
        Place(rank, ActionKind::kForward, chunk, mb, ready, model.forward);
    state.held += model.activation;
    ++state.forwards[chunk];
  }

  void PutInput(int rank, int chunk) {
    RankState& state = state_.ranks[rank];
    const ChunkModel& model = Chunk(rank, chunk);
    const int mb = state.inputs[chunk];
    state_.input_end.At(model.stage, MicrobatchId(mb)) = Place(
        rank, ActionKind::kBackwardInput, chunk, mb, ArrivalOf(model.input_from, mb), model.input);
    Release(state, model.freed_by_input);
    state.pending.Push({chunk, mb});
    ++state.inputs[chunk];
    --state_.inputs_left;
  }

  void PutWeight(int rank) {
    RankState& state = state_.ranks[rank];
    assert(!state.pending.empty());
    const PendingWeight weight = state.pending.Pop();
    const ChunkModel& model = Chunk(rank, weight.chunk);
    // Its I ran earlier on this rank, so it never waits.
    Place(rank, ActionKind::kBackwardWeight, weight.chunk, weight.microbatch, 0.0, model.weight);
    Release(state, model.freed_by_weight);
  }

  // Same arithmetic as the planner's memory tracker, so both see the same peak.
  static void Release(RankState& state, double bytes) {
    state.held = std::max(state.held - bytes, 0.0);
  }

  // Appends the op; it starts when the rank is free and its input is there. Idle time counts
  // as bubble once the rank has run its first chunk-0 forward. Returns the end time.
  double Place(int rank, ActionKind kind, int chunk, int mb, double ready, double cost) {
    RankState& state = state_.ranks[rank];
    const double start = std::max(state.clock, ready);
    if (state.forwards[kDownChunk] > 0) {
      state.bubble += start - state.clock;
      state_.max_bubble = std::max(state_.max_bubble, state.bubble);
    }
    state.clock = start + cost;
    state.order.push_back({kind, static_cast<uint8_t>(chunk), mb});
    ++state_.placed;
    return state.clock;
  }

  const ZbvModel& model_;
  FillSettings fill_;
  SettingsUsed& used_;
  const std::vector<double>& approved_;
  double max_approved_;
  PassState& state_;
  bool asked_ = false;  // AllowedBubble has been called: from here on the pass is its own
  std::vector<std::optional<int>> input_choice_;  // [rank], scratch of PlaceInputs
};

// Starts a pass on `state`: from the search's shared start when there is one, else from
// scratch (offering copies for the passes after it).
std::optional<PassResult> RunPass(const ZbvModel& model, FillSettings fill,
                                  const std::vector<double>& approved, SettingsUsed& used,
                                  SharedStart& shared, PassState& state) {
  if (shared.saved().has_value()) {
    state = *shared.saved();
    return ZbvBuilder(model, fill, approved, used, state).Run();
  }
  state.Reset(model);
  return ZbvBuilder(model, fill, approved, used, state).Run(&shared);
}

// The reference's recursion: re-run with each rank's bubble approved while the largest
// bubble keeps falling, and keep the last pass that lowered it. `used` collects the fill
// settings any pass consulted.
std::optional<PassResult> RunWithRefinement(const ZbvModel& model, FillSettings fill,
                                            SettingsUsed& used, SharedStart& shared,
                                            PassState& state) {
  const std::vector<double> unapproved(static_cast<size_t>(model.ranks), -1.0);
  std::optional<PassResult> best = RunPass(model, fill, unapproved, used, shared, state);
  if (!best.has_value()) return std::nullopt;
  for (int pass = 1; pass < kMaxPasses; ++pass) {
    std::optional<PassResult> next = RunPass(model, fill, best->bubble, used, shared, state);
    if (!next.has_value() || next->max_bubble >= best->max_bubble) break;
    best = std::move(next);
  }
  return best;
}

struct SettingsRun {
  FillSettings fill;
  SettingsUsed used;

  // True when `other` differs only in settings this run never consulted: the same run.
  bool Covers(FillSettings other) const {
    return (other.before_input == fill.before_input || !used.before_input) &&
           (other.before_forward == fill.before_forward || !used.before_forward);
  }
};

// The four fill settings in the reference's order; a later one wins only when strictly
// better. Settings that would repeat an earlier run exactly are not run again.
std::optional<PassResult> BestOfFillSettings(const ZbvModel& model) {
  std::optional<PassResult> best;
  std::vector<SettingsRun> runs;
  SharedStart shared(model);
  PassState state(model);
  for (const bool before_input : {true, false}) {
    for (const bool before_forward : {true, false}) {
      const FillSettings fill{before_input, before_forward};
      const bool repeat = std::any_of(runs.begin(), runs.end(),
                                      [&](const SettingsRun& run) { return run.Covers(fill); });
      if (repeat) continue;
      SettingsRun& run = runs.emplace_back(SettingsRun{fill, {}});
      std::optional<PassResult> result = RunWithRefinement(model, fill, run.used, shared, state);
      if (result.has_value() && (!best.has_value() || result->max_bubble < best->max_bubble)) {
        best = std::move(result);
      }
    }
  }
  return best;
}

Upstream MakeUpstream(const PlanRequest& request, const StageMap& stages, StageId from, StageId to,
                      ActionKind kind) {
  const bool cross_rank = stages.RankOf(from) != stages.RankOf(to);
  return {from, kind, cross_rank ? request.costs.TransferTime(from, to) : 0.0, cross_rank};
}

ChunkModel MakeChunkModel(const PlanRequest& request, const StageMap& stages, StageId stage) {
  const int stages_per_rank = request.topology.stages_per_rank;
  const StageCosts& cost = request.costs.Stage(stage);
  ChunkModel chunk;
  chunk.stage = stage;
  chunk.forward = cost.forward;
  chunk.input = cost.backward_input;
  chunk.weight = cost.backward_weight;
  chunk.activation = request.memory.Activation(stage, stages_per_rank);
  chunk.freed_by_input = request.memory.FreedByInput(stage, stages_per_rank);
  chunk.freed_by_weight = chunk.activation - chunk.freed_by_input;
  if (!stages.IsFirst(stage)) {
    chunk.forward_from =
        MakeUpstream(request, stages, StageId(stage.value - 1), stage, ActionKind::kForward);
  }
  chunk.input_from = stages.IsLast(stage)
                         ? MakeUpstream(request, stages, stage, stage, ActionKind::kForward)
                         : MakeUpstream(request, stages, StageId(stage.value + 1), stage,
                                        ActionKind::kBackwardInput);
  return chunk;
}

double LargestActivationOnRank(const ZbvModel& model, int rank) {
  return std::max(model.chunks[rank][kDownChunk].activation,
                  model.chunks[rank][kBackChunk].activation);
}

// Limits per rank: the request's, else 1F1B's peak (2P chunk activations of the rank's
// larger chunk) on top of the static memory.
ZbvModel MakeModel(const PlanRequest& request, const StageMap& stages) {
  ZbvModel model;
  model.ranks = stages.num_ranks();
  model.microbatches = request.topology.microbatches;
  model.num_stages = stages.num_stages();
  model.static_memory = request.memory.LargestFixed(stages, 2 * request.topology.microbatches);
  for (int rank = 0; rank < model.ranks; ++rank) {
    const std::vector<StageId>& own = stages.StagesOf(RankId(rank));
    model.chunks.push_back({MakeChunkModel(request, stages, own[kDownChunk]),
                            MakeChunkModel(request, stages, own[kBackChunk])});
    model.limit.push_back(request.memory.limit.has_value()
                              ? *request.memory.limit
                              : model.static_memory +
                                    2.0 * model.ranks * LargestActivationOnRank(model, rank));
  }
  return model;
}

ComputeOrder ToComputeOrder(const ZbvModel& model, const PassResult& pass) {
  ComputeOrder order(pass.order.size());
  for (size_t rank = 0; rank < pass.order.size(); ++rank) {
    order[rank].reserve(pass.order[rank].size());
    for (const PlannedOp& op : pass.order[rank]) {
      order[rank].push_back(
          MakeCompute(op.kind, model.chunks[rank][op.chunk].stage, MicrobatchId(op.microbatch)));
    }
  }
  return order;
}

double LargestActivation(const ZbvModel& model) {
  double unit = 0.0;
  for (int rank = 0; rank < model.ranks; ++rank) {
    unit = std::max(unit, LargestActivationOnRank(model, rank));
  }
  return unit;
}

// Whether a pass finishes with every rank's limit at `limit`.
bool PlansAt(ZbvModel& model, double limit) {
  std::fill(model.limit.begin(), model.limit.end(), limit);
  return BestOfFillSettings(model).has_value();
}

// The smallest limit with which a pass finishes, above `fails` (a limit it does not finish
// with): the first whole number of chunk activations (of the largest stage) that works, by
// bisection over the count, then bisection within that last activation to a relative 1e-9,
// since with unequal stages the threshold lies between whole activations. nullopt when not
// even every activation held at once (2M per rank, beyond which a limit cannot bind) works.
std::optional<double> SmallestWorkingLimit(ZbvModel model, double fails) {
  const double unit = LargestActivation(model);
  const int most = 2 * model.microbatches + 1;
  const auto limit_of = [&](int units) { return model.static_memory + units * unit; };
  int low = static_cast<int>(
      std::floor(std::clamp((fails - model.static_memory) / unit, 0.0, static_cast<double>(most))));
  if (!PlansAt(model, limit_of(most))) return std::nullopt;
  int high = most;  // plans; `low` units (or `fails`, whichever is more) does not
  while (high - low > 1) {
    const int middle = low + (high - low) / 2;
    (PlansAt(model, limit_of(middle)) ? high : low) = middle;
  }
  double below = std::max(fails, limit_of(low));
  double works = limit_of(high);
  while (works - below > 1e-9 * works) {
    const double middle = below + (works - below) / 2;
    (PlansAt(model, middle) ? works : below) = middle;
  }
  return works;
}

// The greedy pass is not monotone in the limit: stuck under one limit, it may finish under a
// smaller one, and that plan keeps the larger limit too. Steps every rank's limit down in whole
// chunk activations (of the largest stage) while each rank can still hold one.
std::optional<PassResult> StepDown(ZbvModel model) {
  const double unit = LargestActivation(model);
  const std::vector<double> asked = model.limit;
  for (int units = 1;; ++units) {
    for (int rank = 0; rank < model.ranks; ++rank) {
      model.limit[rank] = asked[rank] - units * unit;
      if (model.limit[rank] < model.static_memory + LargestActivationOnRank(model, rank)) {
        return std::nullopt;
      }
    }
    if (std::optional<PassResult> result = BestOfFillSettings(model)) return result;
  }
}

// Names `smallest`, the smallest limit with which a pass finishes (above the one asked for).
Status LimitTooSmall(const PlanRequest& request, const ZbvModel& model,
                     std::optional<double> smallest) {
  const std::string shape =
      "P=" + std::to_string(model.ranks) + ", M=" + std::to_string(model.microbatches);
  const std::string asked =
      request.memory.limit.has_value()
          ? "memory limit " + request.memory.Describe(*request.memory.limit)
          : "the default memory limit (1F1B's peak: static + 2P chunk activations, " +
                FormatNumber(model.limit.front()) + " on rank 0)";
  if (!smallest.has_value()) {
    return InvalidArgument("zbv: the greedy V schedule gets stuck for " + shape +
                           " even with every activation held at once (" + asked + ")");
  }
  const double unit = LargestActivation(model);
  return InvalidArgument("zbv: " + asked + " is too small for " + shape +
                         " (the greedy V schedule gets stuck); " +
                         request.memory.SmallestLimitPhrase(StageMap(request.topology)) +
                         request.memory.Describe(*smallest) + " (" + request.memory.FixedName() +
                         " " + FormatNumber(model.static_memory) + " + " +
                         FormatNumber((*smallest - model.static_memory) / unit) +
                         " chunk activations of " + FormatNumber(unit) + ")");
}

Status CheckZbvPlacement(const Topology& topology) {
  if (topology.placement == Placement::kVShape && topology.stages_per_rank == 2) {
    return Status::Ok();
  }
  return InvalidArgument("zbv needs the V placement with 2 stages per rank, got V=" +
                         std::to_string(topology.stages_per_rank) +
                         " placement=" + std::string(PlacementName(topology.placement)));
}

}  // namespace

StatusOr<ComputeOrder> GenerateZbv(const PlanRequest& request, const StageMap& stages) {
  PIPEPLAN_RETURN_IF_ERROR(CheckZbvPlacement(request.topology));
  ZbvModel model = MakeModel(request, stages);
  std::optional<PassResult> best = BestOfFillSettings(model);
  if (!best.has_value()) best = StepDown(model);
  if (best.has_value()) return ToComputeOrder(model, *best);
  // Stuck under the limit and every whole activation below it: the smallest limit that works
  // at all plans too when it is no larger, else it is what the error names.
  const std::optional<double> smallest = SmallestWorkingLimit(model, model.static_memory);
  if (smallest.has_value() &&
      *smallest <= *std::min_element(model.limit.begin(), model.limit.end())) {
    ZbvModel at_smallest = model;
    std::fill(at_smallest.limit.begin(), at_smallest.limit.end(), *smallest);
    if (std::optional<PassResult> planned = BestOfFillSettings(at_smallest)) {
      return ToComputeOrder(model, *planned);
    }
  }
  return LimitTooSmall(request, model, smallest);
}

StatusOr<double> SmallestZbvLimit(const PlanRequest& request, const StageMap& stages) {
  PIPEPLAN_RETURN_IF_ERROR(CheckZbvPlacement(request.topology));
  const ZbvModel model = MakeModel(request, stages);
  const std::optional<double> smallest = SmallestWorkingLimit(model, model.static_memory);
  if (!smallest.has_value()) {
    return InvalidArgument(
        "zbv: the greedy V schedule gets stuck even with every activation "
        "held at once");
  }
  return *smallest;
}

}  // namespace pipeplan::strategies
