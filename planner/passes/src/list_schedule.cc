#include "pipeplan/passes/list_schedule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "pipeplan/model/plan_util.h"

namespace pipeplan {
namespace {

constexpr double kNotDone = -1.0;
constexpr int kNoSlot = -1;
constexpr int kNeverReady = -2;  // blocked on an input outside the topology

// An input a compute part needs: the output of the F (or of the B/I) of a stage.
struct Input {
  bool forward = true;  // F's activation, else B/I's input gradient
  StageId stage;
  MicrobatchId mb;
};

// At most two inputs per part; a fixed array keeps this free of allocation.
struct Inputs {
  Input items[2];
  int size = 0;
  void push_back(const Input& input) { items[size++] = input; }
  const Input* begin() const { return items; }
  const Input* end() const { return items + size; }
};

// Per stage, what its compute parts need to know: who owns it, what its neighbours are, the
// transfers into it and its op costs. Looked up once so the hot loop does no searching.
struct StageInfo {
  int rank = 0;
  bool first = false;
  bool last = false;
  double from_previous = 0.0;           // transfer of F(s - 1) into s
  double from_next = 0.0;               // transfer of B/I(s + 1) into s
  double overhead_from_previous = 0.0;  // receive overhead of that transfer
  double overhead_from_next = 0.0;
  double forward = 0.0;
  double backward = 0.0;
  double backward_input = 0.0;
  double backward_weight = 0.0;
};

class ListScheduler {
 public:
  ListScheduler(const ComputeView& compute, const StageMap& stages, int microbatches,
                const CostModel& costs)
      : compute_(compute),
        stages_(stages),
        costs_(costs),
        microbatches_(microbatches),
        slots_per_kind_(static_cast<size_t>(stages.num_stages()) *
                        static_cast<size_t>(microbatches)),
        end_(2 * slots_per_kind_, kNotDone),
        depth_(2 * slots_per_kind_, 0),
        head_(compute.size(), 0),
        rank_free_(compute.size(), 0.0),
        rank_depth_(compute.size(), 0),
        queued_(compute.size(), 0),
        blocked_on_(compute.size(), kNoSlot) {
    std::vector<size_t> offsets(compute.size() + 1, 0);
    for (size_t r = 0; r < compute.size(); ++r) offsets[r + 1] = offsets[r] + compute[r].size();
    result_ = ListScheduleResult(std::move(offsets));
    for (int s = 0; s < stages.num_stages(); ++s) {
      const StageId stage(s);
      StageInfo& info = info_.emplace_back();
      info.rank = stages.RankOf(stage).value;
      info.first = stages.IsFirst(stage);
      info.last = stages.IsLast(stage);
      if (!info.first) {
        info.from_previous = costs.TransferTime(StageId(s - 1), stage);
        info.overhead_from_previous = costs.ReceiveOverhead(StageId(s - 1), stage);
      }
      if (!info.last) {
        info.from_next = costs.TransferTime(StageId(s + 1), stage);
        info.overhead_from_next = costs.ReceiveOverhead(StageId(s + 1), stage);
      }
      const StageCosts& c = costs.Stage(stage);
      info.forward = c.forward;
      info.backward = c.backward;
      info.backward_input = c.backward_input;
      info.backward_weight = c.backward_weight;
    }
  }

  StatusOr<ListScheduleResult> Run() {
    work_.reserve(compute_.size());
    for (size_t r = 0; r < compute_.size(); ++r) Wake(static_cast<int>(r));
    size_t done = 0;
    // work_ grows while it is walked, so it is indexed rather than iterated.
    size_t next = 0;
    while (next < work_.size()) {
      const int rank = work_[next++];
      queued_[rank] = 0;
      // Run the rank as far as its inputs allow.
      const std::vector<const Action*>& actions = compute_[rank];
      while (head_[rank] < actions.size() && TryExecute(rank, *actions[head_[rank]])) {
        ++head_[rank];
        ++done;
      }
    }
    if (done != result_.size()) return Stuck();
    return std::move(result_);
  }

 private:
  // Producers of the inputs of one compute part (not an overlap cell).
  Inputs InputsOf(const Action& part) const {
    Inputs inputs;
    const StageId s = part.stage;
    const MicrobatchId m = part.microbatch;
    switch (part.kind) {
      case ActionKind::kForward:
        if (!stages_.IsFirst(s)) inputs.push_back({true, StageId(s.value - 1), m});
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        inputs.push_back({true, s, m});
        if (!stages_.IsLast(s)) inputs.push_back({false, StageId(s.value + 1), m});
        break;
      case ActionKind::kBackwardWeight:
        inputs.push_back({false, s, m});
        break;
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
    return inputs;
  }

  // The slot of the output of F (forward) or B/I (not forward) of (stage, mb); kNoSlot when
  // outside the topology.
  int SlotOf(bool forward, StageId stage, MicrobatchId mb) const {
    if (stage.value < 0 || stage.value >= stages_.num_stages() || mb.value < 0 ||
        mb.value >= microbatches_) {
      return kNoSlot;
    }
    const size_t index = static_cast<size_t>(stage.value) * static_cast<size_t>(microbatches_) +
                         static_cast<size_t>(mb.value);
    return static_cast<int>(forward ? index : slots_per_kind_ + index);
  }

  // Folds one input into (start, depth); false when it is not there yet (then the rank is
  // blocked on it).
  bool TakeInput(int rank, const Input& input, StageId consumer, double& start, int& depth) {
    const int slot = SlotOf(input.forward, input.stage, input.mb);
    if (slot == kNoSlot) {
      blocked_on_[rank] = kNeverReady;
      return false;
    }
    const double end = end_[slot];
    if (end == kNotDone) {
      blocked_on_[rank] = slot;
      return false;
    }
    double ready = end;
    if (info_[input.stage.value].rank != rank) {
      ready = std::max(end + TransferInto(input.stage, consumer),
                       rank_free_[rank] + costs_.ReceiveOverhead(input.stage, consumer));
    }
    start = std::max(start, ready);
    depth = std::max(depth, depth_[slot]);
    return true;
  }

  // TransferTime(from, to) for a neighbour, from the table; anything else (only in plans the
  // validator rejects) from the cost model.
  double TransferInto(StageId from, StageId to) const {
    if (from.value + 1 == to.value) return info_[to.value].from_previous;
    if (from.value - 1 == to.value) return info_[to.value].from_next;
    return costs_.TransferTime(from, to);
  }

  // Folds the inputs of one part (not an overlap cell) into (start, depth). The common case,
  // a part inside the topology, reads its neighbours' slots directly.
  bool TakeInputs(int rank, const Action& part, double& start, int& depth) {
    const int s = part.stage.value;
    const int m = part.microbatch.value;
    if (s < 0 || s >= static_cast<int>(info_.size()) || m < 0 || m >= microbatches_) {
      for (const Input& input : InputsOf(part)) {
        if (!TakeInput(rank, input, part.stage, start, depth)) return false;
      }
      return true;
    }
    const StageInfo& info = info_[s];
    const int forward_slot = s * microbatches_ + m;
    const int grad_slot = static_cast<int>(slots_per_kind_) + forward_slot;
    switch (part.kind) {
      case ActionKind::kForward:
        return info.first ||
               TakeNeighbour(rank, forward_slot - microbatches_, info_[s - 1].rank,
                             info.from_previous, info.overhead_from_previous, start, depth);
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (!TakeOwn(rank, forward_slot, part.stage, start, depth)) return false;
        return info.last || TakeNeighbour(rank, grad_slot + microbatches_, info_[s + 1].rank,
                                          info.from_next, info.overhead_from_next, start, depth);
      case ActionKind::kBackwardWeight:
        return TakeOwn(rank, grad_slot, part.stage, start, depth);
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return true;
    }
    return true;
  }

  // An input from a neighbouring stage owned by `owner`. When remote it is `transfer` away,
  // and its receive, posted when the rank's previous compute ends (where comm insertion puts
  // it), takes at least `overhead`.
  bool TakeNeighbour(int rank, int slot, int owner, double transfer, double overhead, double& start,
                     int& depth) {
    const double end = end_[slot];
    if (end == kNotDone) {
      blocked_on_[rank] = slot;
      return false;
    }
    const double ready =
        owner != rank ? std::max(end + transfer, rank_free_[rank] + overhead) : end;
    start = std::max(start, ready);
    depth = std::max(depth, depth_[slot]);
    return true;
  }

  // An input from the part's own stage (F before B/I, I before W): local in a valid plan.
  bool TakeOwn(int rank, int slot, StageId stage, double& start, int& depth) {
    const double end = end_[slot];
    if (end == kNotDone) {
      blocked_on_[rank] = slot;
      return false;
    }
    const bool remote = info_[stage.value].rank != rank;
    start = std::max(start, remote ? end + costs_.TransferTime(stage, stage) : end);
    depth = std::max(depth, depth_[slot]);
    return true;
  }

  double CostOf(const Action& action) const {
    const int s = action.stage.value;
    if (s < 0 || s >= static_cast<int>(info_.size())) return costs_.ComputeTime(action);
    const StageInfo& info = info_[s];
    switch (action.kind) {
      case ActionKind::kForward:
        return info.forward;
      case ActionKind::kBackward:
        return info.backward;
      case ActionKind::kBackwardInput:
        return info.backward_input;
      case ActionKind::kBackwardWeight:
        return info.backward_weight;
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
    return costs_.ComputeTime(action);
  }

  // Records the end of `part` (F: its activation, B/I: its input gradient) and wakes the rank
  // that consumes it.
  void Finish(const Action& part, double end, int depth) {
    const bool forward = part.kind == ActionKind::kForward;
    if (!forward && part.kind != ActionKind::kBackward && part.kind != ActionKind::kBackwardInput) {
      return;
    }
    const int slot = SlotOf(forward, part.stage, part.microbatch);
    if (slot == kNoSlot) return;
    end_[slot] = end;
    depth_[slot] = depth;
    const StageInfo& info = info_[part.stage.value];
    if (forward && !info.last) Wake(info_[part.stage.value + 1].rank);
    if (!forward && !info.first) Wake(info_[part.stage.value - 1].rank);
  }

  // Runs `action`, the head of `rank`, if all its inputs are there.
  bool TryExecute(int rank, const Action& action) {
    blocked_on_[rank] = kNoSlot;
    double start = rank_free_[rank];
    int depth = rank_depth_[rank];
    const bool overlap = action.kind == ActionKind::kOverlapFB;
    if (overlap) {
      for (const Action* part : ComputeParts(action)) {
        if (!TakeInputs(rank, *part, start, depth)) return false;
      }
    } else if (!TakeInputs(rank, action, start, depth)) {
      return false;
    }
    ++depth;
    const double end = start + CostOf(action);
    result_.At(rank, head_[rank]) = {start, end, depth};
    rank_free_[rank] = end;
    rank_depth_[rank] = depth;
    if (overlap) {
      for (const Action* part : ComputeParts(action)) Finish(*part, end, depth);
    } else {
      Finish(action, end, depth);
    }
    return true;
  }

  // Queues `rank` for another look, unless that look would stop where the last one did: at
  // an input that is still not there (looks have no side effects until they succeed).
  void Wake(int rank) {
    if (queued_[rank]) return;
    const int blocked = blocked_on_[rank];
    if (blocked == kNeverReady || (blocked != kNoSlot && end_[blocked] == kNotDone)) return;
    queued_[rank] = 1;
    work_.push_back(rank);
  }

  Status Stuck() const {
    std::string message = "the compute order cannot finish: ";
    bool first = true;
    for (size_t r = 0; r < compute_.size(); ++r) {
      if (head_[r] >= compute_[r].size()) continue;
      if (!first) message += "; ";
      first = false;
      const Action& action = *compute_[r][head_[r]];
      message += "rank " + std::to_string(r) + " waits at compute action " +
                 std::to_string(head_[r]) + " (" + ToString(action) + ") for " +
                 MissingInput(action, static_cast<int>(r));
    }
    return InvalidArgument(message);
  }

  std::string MissingInput(const Action& action, int rank) const {
    for (const Action* part : ComputeParts(action)) {
      for (const Input& input : InputsOf(*part)) {
        const int slot = SlotOf(input.forward, input.stage, input.mb);
        if (slot == kNoSlot) return "an input outside the topology";
        if (end_[slot] != kNotDone) continue;
        const char* what = input.forward ? "F" : "B/I";
        const RankId owner = stages_.RankOf(input.stage);
        return std::string(what) + " of stage " + std::to_string(input.stage.value) +
               " microbatch " + std::to_string(input.mb.value) + " (rank " +
               std::to_string(owner.value) +
               (owner == RankId(rank) ? ", later on this rank)" : ")");
      }
    }
    return "an input";
  }

  const ComputeView& compute_;
  const StageMap& stages_;
  const CostModel& costs_;
  std::vector<StageInfo> info_;
  int microbatches_;
  size_t slots_per_kind_;
  std::vector<double> end_;  // per slot: the producer's end, kNotDone until it ran
  std::vector<int> depth_;   // per slot: the producer's depth
  std::vector<size_t> head_;
  std::vector<double> rank_free_;
  std::vector<int> rank_depth_;
  std::vector<uint8_t> queued_;
  std::vector<int> blocked_on_;  // per rank: the slot its last look stopped at (or kNoSlot)
  std::vector<int> work_;        // FIFO of ranks to look at; each is queued at most once at a time
  ListScheduleResult result_;
};

// Merges the ranks' completion sequences (each rank completes in program order) by (end,
// start, depth, rank) with a loser tree: every internal node keeps the loser of its match, so
// taking the smallest head replays only its rank's path, log2(P) comparisons.
class RankMerger {
 public:
  explicit RankMerger(const ListScheduleResult& schedule)
      : schedule_(schedule), next_(static_cast<size_t>(schedule.num_ranks()), 0) {
    const int ranks = schedule.num_ranks();
    while (leaves_ < ranks) leaves_ *= 2;
    heads_.resize(static_cast<size_t>(leaves_));  // ranks past the last stay exhausted
    for (int r = 0; r < ranks; ++r) LoadHead(r);
    tree_.assign(static_cast<size_t>(leaves_), 0);
    winner_ = Build(1);
  }

  std::vector<ComputeRef> Run() {
    std::vector<ComputeRef> order;
    order.reserve(schedule_.size());
    for (size_t emitted = 0; emitted < schedule_.size(); ++emitted) {
      const int rank = winner_;
      order.push_back({rank, next_[rank]++});
      LoadHead(rank);
      int candidate = rank;
      for (int node = (leaves_ + rank) / 2; node >= 1; node /= 2) {
        if (Before(tree_[node], candidate)) std::swap(tree_[node], candidate);
      }
      winner_ = candidate;
    }
    return order;
  }

 private:
  // The sort key of a rank's next compute action.
  struct Head {
    bool exhausted = true;  // exhausted ranks come last
    double end = 0.0;
    double start = 0.0;
    int depth = 0;
  };

  void LoadHead(int rank) {
    const std::span<const ScheduledCompute> times = schedule_.Rank(rank);
    Head& head = heads_[rank];
    head.exhausted = next_[rank] >= static_cast<int>(times.size());
    if (head.exhausted) return;
    const ScheduledCompute& t = times[next_[rank]];
    head.end = t.end;
    head.start = t.start;
    head.depth = t.depth;
  }

  // Plays the matches below `node`, keeps each loser and returns the winner.
  int Build(int node) {
    if (node >= leaves_) return node - leaves_;
    const int left = Build(2 * node);
    const int right = Build(2 * node + 1);
    const bool right_wins = Before(right, left);
    tree_[node] = right_wins ? left : right;
    return right_wins ? right : left;
  }

  // Whether the head of rank a completes before the head of rank b: by (end, start, depth,
  // rank).
  bool Before(int a, int b) const {
    const Head& x = heads_[a];
    const Head& y = heads_[b];
    if (x.exhausted || y.exhausted) return !x.exhausted;
    if (x.end != y.end) return x.end < y.end;
    if (x.start != y.start) return x.start < y.start;
    if (x.depth != y.depth) return x.depth < y.depth;
    return a < b;
  }

  const ListScheduleResult& schedule_;
  int leaves_ = 1;
  std::vector<int> next_;    // per rank: its next compute action to emit
  std::vector<Head> heads_;  // per leaf (rank)
  std::vector<int> tree_;    // tree_[node]: the losing rank of internal node's match (1-based)
  int winner_ = 0;
};

}  // namespace

std::vector<ComputeRef> CompletionOrder(const ListScheduleResult& schedule) {
  return RankMerger(schedule).Run();
}

StatusOr<ListScheduleResult> RunListSchedule(const ComputeView& compute, const StageMap& stages,
                                             const CostModel& costs) {
  int microbatches = 0;
  for (int s = 0; s < stages.num_stages(); ++s) {
    microbatches = std::max(microbatches, stages.MicrobatchesOf(StageId(s)));
  }
  return ListScheduler(compute, stages, microbatches, costs).Run();
}

}  // namespace pipeplan
