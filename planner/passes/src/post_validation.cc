#include "pipeplan/passes/post_validation.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/passes/list_schedule.h"
#include "pipeplan/passes/scheduled_passes.h"

namespace pipeplan {
namespace {

Action MakePvAction(ActionKind kind, StageId stage, int peer) {
  Action action = MakeCompute(kind, stage, MicrobatchId(0));
  action.peer = RankId(peer);
  return action;
}

class PostValidationInserter {
 public:
  // `schedule`, when given, is the list schedule of the programs' compute order under `costs`.
  PostValidationInserter(std::vector<RankProgram> programs, const StageMap& stages,
                         const CostModel& costs, const ListScheduleResult* schedule)
      : programs_(std::move(programs)), stages_(stages), costs_(costs), schedule_(schedule) {}

  StatusOr<std::vector<RankProgram>> Run() {
    PIPEPLAN_RETURN_IF_ERROR(Schedule());
    const std::vector<double> pv_times = ValidationTimes();
    ChoosePrefixes(pv_times);
    for (size_t r = 0; r < programs_.size(); ++r) Rebuild(static_cast<int>(r));
    TagRollbacks();
    return std::move(programs_);
  }

 private:
  Status Schedule() {
    int microbatches = 0;
    for (int s = 0; s < stages_.num_stages(); ++s)
      microbatches = std::max(microbatches, stages_.MicrobatchesOf(StageId(s)));
    if (schedule_ == nullptr) {
      const ProgramComputeView view = ExtractCompute(programs_);
      PIPEPLAN_ASSIGN_OR_RETURN(own_schedule_, RunListSchedule(view.order, stages_, costs_));
      schedule_ = &own_schedule_;
    }
    // Filled while the prefixes are scanned: a send comes after its producer on its rank.
    forward_end_.emplace(stages_.num_stages(), microbatches, 0.0);
    input_grad_end_.emplace(stages_.num_stages(), microbatches, 0.0);
    return Status::Ok();
  }

  StageId ChunkZero(int rank) const { return stages_.StagesOf(RankId(rank))[0]; }

  double LatencyInto(StageId stage) const {
    if (!stages_.IsFirst(stage)) return costs_.TransferTime(StageId(stage.value - 1), stage);
    if (!stages_.IsLast(stage)) return costs_.TransferTime(stage, StageId(stage.value + 1));
    return 0.0;
  }

  // The reference's PV time of each rank: walking from the last rank down, the running max of
  // (start of the chunk-0 forward of microbatch min(2(P-1-r), M-1) on r) - the latency into it.
  std::vector<double> ValidationTimes() const {
    const int ranks = static_cast<int>(programs_.size());
    std::vector<double> times(ranks, 0.0);
    double running = -std::numeric_limits<double>::infinity();
    for (int r = ranks - 1; r >= 0; --r) {
      const StageId stage = ChunkZero(r);
      const int target = std::min(2 * (ranks - 1 - r), stages_.MicrobatchesOf(stage) - 1);
      size_t compute = 0;
      for (const Action& a : programs_[r].actions) {
        if (!IsCompute(a.kind)) continue;
        if (a.kind == ActionKind::kForward && a.stage == stage && a.microbatch.value == target) {
          running = std::max(
              running, schedule_->At(static_cast<int>(r), compute).start - LatencyInto(stage));
          break;  // one forward per (stage, microbatch)
        }
        ++compute;
      }
      times[r] = running;
    }
    return times;
  }

  // When an action happens in the reference's ordering: compute at its start, comm when its
  // data is ready.
  double TimeOf(int rank, size_t index, size_t compute_index) const {
    const Action& a = programs_[rank].actions[index];
    switch (a.kind) {
      case ActionKind::kSendForward:
        return forward_end_->At(a.stage, a.microbatch);
      case ActionKind::kRecvForward:
        return forward_end_->At(StageId(a.stage.value - 1), a.microbatch);
      case ActionKind::kSendBackward:
        return input_grad_end_->At(a.stage, a.microbatch);
      case ActionKind::kRecvBackward:
        return input_grad_end_->At(StageId(a.stage.value + 1), a.microbatch);
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
        return schedule_->At(rank, compute_index).start;
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return 0.0;
    }
    return 0.0;
  }

  // Before PV only forward work may run: receives of activations, and on ranks 0..P-2 chunk-0
  // forwards and their sends; the last rank also runs its chunk 1 (the V turn is local).
  // (Receives are placed by their sends, see ChoosePrefixes.)
  bool AllowedBeforePv(int rank, const Action& a) const {
    const bool last = rank == static_cast<int>(programs_.size()) - 1;
    switch (a.kind) {
      case ActionKind::kRecvForward:
        return true;
      case ActionKind::kForward:
      case ActionKind::kSendForward:
        return last || a.stage == ChunkZero(rank);
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return false;
    }
    return false;
  }

  static bool IsReceive(ActionKind kind) {
    return kind == ActionKind::kRecvForward || kind == ActionKind::kRecvBackward;
  }

  // Records the end of a compute action's outputs, for timing the sends after it.
  void RecordEnds(int rank, const Action& action, size_t compute_index) {
    const double end = schedule_->At(rank, compute_index).end;
    for (const Action* part : ComputeParts(action)) {
      if (part->kind == ActionKind::kForward) forward_end_->At(part->stage, part->microbatch) = end;
      if (part->kind == ActionKind::kBackward || part->kind == ActionKind::kBackwardInput) {
        input_grad_end_->At(part->stage, part->microbatch) = end;
      }
    }
  }

  // Compute and sends: the longest prefix of allowed actions that happen before the PV time.
  size_t TimedPrefix(int rank, double pv_time) {
    const auto& actions = programs_[rank].actions;
    size_t compute = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (IsReceive(actions[i].kind)) continue;
      if (!AllowedBeforePv(rank, actions[i]) || TimeOf(rank, i, compute) >= pv_time) return i;
      if (IsCompute(actions[i].kind)) RecordEnds(rank, actions[i], compute++);
    }
    return actions.size();
  }

  // Counts per peer; a rank talks to a few peers, so a short list searched linearly (a
  // ranks x ranks table would be quadratic in P).
  using PeerCounts = std::vector<std::pair<int, int>>;  // (peer, count)

  static int& CountFor(PeerCounts& counts, int peer) {
    for (auto& [p, count] : counts) {
      if (p == peer) return count;
    }
    return counts.emplace_back(peer, 0).second;
  }
  static int CountOf(const PeerCounts& counts, int peer) {
    for (const auto& [p, count] : counts) {
      if (p == peer) return count;
    }
    return 0;
  }

  // Per sender: how many of its sends to each peer come before its cut. The k-th send on a
  // link pairs with the k-th receive (as the comm pass built them), so a receive is before PV
  // exactly when its ordinal on the link is below that count.
  std::vector<PeerCounts> EarlySends(const std::vector<size_t>& cut) const {
    std::vector<PeerCounts> early(programs_.size());
    for (size_t from = 0; from < programs_.size(); ++from) {
      const auto& actions = programs_[from].actions;
      for (size_t i = 0; i < cut[from]; ++i) {
        const Action& a = actions[i];
        if (a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward) {
          ++CountFor(early[from], a.peer.value);
        }
      }
    }
    return early;
  }

  // Walks a rank's receives in order, telling for each whether it is before PV.
  class ReceiveSides {
   public:
    ReceiveSides(const std::vector<PeerCounts>& early, int rank) : early_(early), rank_(rank) {}
    bool Early(const Action& receive) {
      const int from = receive.peer.value;
      if (from < 0 || from >= static_cast<int>(early_.size())) return false;
      for (Link& link : links_) {
        if (link.from == from) return link.seen++ < link.early;
      }
      const Link& link =
          links_.emplace_back(Link{from, CountOf(early_[static_cast<size_t>(from)], rank_), 1});
      return 0 < link.early;
    }

   private:
    struct Link {
      int from;
      int early;  // the sender's sends to this rank before its cut
      int seen;   // receives from it walked so far
    };
    const std::vector<PeerCounts>& early_;
    int rank_;
    std::vector<Link> links_;
  };

  // The first compute action before the cut fed by a receive that comes after PV; the cut if
  // there is none.
  size_t FirstStarvedConsumer(const std::vector<size_t>& cut, const std::vector<PeerCounts>& early,
                              int rank) const {
    const auto& actions = programs_[rank].actions;
    ReceiveSides sides(early, rank);
    std::vector<const Action*> late;  // receives after PV so far; rare before the cut
    for (size_t i = 0; i < cut[rank]; ++i) {
      const Action& a = actions[i];
      if (IsReceive(a.kind)) {
        if (!sides.Early(a)) late.push_back(&a);
        continue;
      }
      if (!IsCompute(a.kind)) continue;
      for (const Action* part : ComputeParts(a)) {
        for (const Action* receive : late) {
          const bool feeds =
              receive->stage == part->stage && receive->microbatch == part->microbatch &&
              (receive->kind == ActionKind::kRecvForward) == (part->kind == ActionKind::kForward);
          if (feeds) return i;
        }
      }
    }
    return cut[rank];
  }

  // Decides which actions of each rank run before its PV. Compute and sends: the longest
  // prefix that is allowed and happens before the rank's PV time. Receives follow their sends,
  // so every transfer has both ends on the same side of PV; a consumer before PV whose receive
  // ends up after it cuts the prefix there. Prefixes only shrink, so this settles (on the
  // largest prefixes that hold together, whatever order the ranks are looked at in).
  void ChoosePrefixes(const std::vector<double>& pv_times) {
    const size_t ranks = programs_.size();
    std::vector<size_t> cut(ranks);
    for (size_t r = 0; r < ranks; ++r) cut[r] = TimedPrefix(static_cast<int>(r), pv_times[r]);
    std::vector<PeerCounts> early = EarlySends(cut);
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < ranks; ++r) {
        const size_t starved = FirstStarvedConsumer(cut, early, static_cast<int>(r));
        if (starved < cut[r]) {
          cut[r] = starved;
          changed = true;
        }
      }
      if (changed) early = EarlySends(cut);
    }
    before_.resize(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      const auto& actions = programs_[r].actions;
      ReceiveSides sides(early, static_cast<int>(r));
      before_[r].resize(actions.size());
      for (size_t i = 0; i < actions.size(); ++i) {
        const bool before = IsReceive(actions[i].kind) ? sides.Early(actions[i]) : i < cut[r];
        before_[r][i] = before ? 1 : 0;
      }
    }
  }

  // Stable partition: actions before PV (in their order), the PV group, then the rest.
  void Rebuild(int rank) {
    auto& actions = programs_[rank].actions;
    std::vector<Action> rebuilt;
    rebuilt.reserve(actions.size() + 3);
    for (size_t i = 0; i < actions.size(); ++i) {
      if (before_[rank][i]) rebuilt.push_back(std::move(actions[i]));
    }
    const int last = static_cast<int>(programs_.size()) - 1;
    const StageId stage = ChunkZero(rank);
    if (rank < last)
      rebuilt.push_back(MakePvAction(ActionKind::kRecvPostValidation, stage, rank + 1));
    if (rank > 0) rebuilt.push_back(MakePvAction(ActionKind::kSendPostValidation, stage, rank - 1));
    rebuilt.push_back(MakePvAction(ActionKind::kPostValidation, stage, rank));
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!before_[rank][i]) rebuilt.push_back(std::move(actions[i]));
    }
    actions = std::move(rebuilt);
  }

  // A chunk-0 RECV_F is tagged when the sender issued the SEND_F before its own PV.
  void TagRollbacks() {
    for (size_t r = 1; r < programs_.size(); ++r) {
      std::vector<int> sent_early;  // microbatches rank r-1 sent into our chunk 0 before its PV
      for (const Action& a : programs_[r - 1].actions) {
        if (a.kind == ActionKind::kPostValidation) break;
        if (a.kind == ActionKind::kSendForward && a.peer == RankId(static_cast<int>(r))) {
          sent_early.push_back(a.microbatch.value);
        }
      }
      const StageId stage = ChunkZero(static_cast<int>(r));
      for (Action& a : programs_[r].actions) {
        if (a.kind != ActionKind::kRecvForward || a.stage != stage) continue;
        a.rollback =
            std::find(sent_early.begin(), sent_early.end(), a.microbatch.value) != sent_early.end();
      }
    }
  }

  std::vector<RankProgram> programs_;
  const StageMap& stages_;
  const CostModel& costs_;
  const ListScheduleResult* schedule_;
  ListScheduleResult own_schedule_;  // when none was given
  std::optional<StageMbTable<double>> forward_end_;
  std::optional<StageMbTable<double>> input_grad_end_;
  std::vector<std::vector<uint8_t>> before_;  // [rank][action]: runs before the rank's PV
};

}  // namespace

StatusOr<std::vector<RankProgram>> InsertPostValidation(std::vector<RankProgram> programs,
                                                        const StageMap& stages,
                                                        const CostModel& costs) {
  return PostValidationInserter(std::move(programs), stages, costs, nullptr).Run();
}

StatusOr<std::vector<RankProgram>> InsertPostValidation(std::vector<RankProgram> programs,
                                                        const StageMap& stages,
                                                        const CostModel& costs,
                                                        const ListScheduleResult& schedule) {
  return PostValidationInserter(std::move(programs), stages, costs, &schedule).Run();
}

}  // namespace pipeplan
