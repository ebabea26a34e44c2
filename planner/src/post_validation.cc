#include "pipeplan/planner/post_validation.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>

#include "list_schedule.h"
#include "plan_util.h"
#include "scheduled_passes.h"
#include "stage_mb_table.h"
#include "transfer_links.h"

namespace pipeplan {
namespace {

constexpr std::array<std::string_view, 10> kZeroBubbleFamily = {
    "zb",  "zb-1p",           "zb-2p",  "zb-h1", "zb-h2", "interleaved-zb",
    "zbv", "zbv-handcrafted", "v-half", "v-min"};

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
    PairTransfers();
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
    forward_end_.emplace(stages_.num_stages(), microbatches, 0.0);
    input_grad_end_.emplace(stages_.num_stages(), microbatches, 0.0);
    for (size_t r = 0; r < programs_.size(); ++r) {
      size_t compute = 0;
      for (const Action& action : programs_[r].actions) {
        if (!IsCompute(action.kind)) continue;
        const double end = schedule_->At(static_cast<int>(r), compute++).end;
        for (const Action* part : ComputeParts(action)) {
          if (part->kind == ActionKind::kForward)
            forward_end_->At(part->stage, part->microbatch) = end;
          if (part->kind == ActionKind::kBackward || part->kind == ActionKind::kBackwardInput) {
            input_grad_end_->At(part->stage, part->microbatch) = end;
          }
        }
      }
    }
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

  // send_of_[r][i], for receive i on rank r: the index of its send on the sender's program
  // (the k-th send on a link pairs with the k-th receive, as the comm pass built them).
  void PairTransfers() {
    const TransferLinks links(programs_);
    send_of_.resize(programs_.size());
    for (size_t r = 0; r < programs_.size(); ++r)
      send_of_[r].assign(programs_[r].actions.size(), 0);
    for (size_t from = 0; from < programs_.size(); ++from) {
      for (const TransferLinks::Link& link : links.SendLinks(static_cast<int>(from))) {
        const TransferLinks::Link* back = links.FindReceiveLink(link.peer, static_cast<int>(from));
        if (back == nullptr) continue;
        const std::span<const TransferRef> sends = links.Refs(link);
        const std::span<const TransferRef> receives = links.Refs(*back);
        for (size_t k = 0; k < std::min(sends.size(), receives.size()); ++k) {
          send_of_[link.peer][receives[k].index] = sends[k].index;
        }
      }
    }
  }

  // Whether action i of `rank` runs before the rank's PV under the current cuts: compute and
  // sends when they are before the cut, receives when their send is before the sender's.
  bool BeforePv(const std::vector<size_t>& cut, int rank, size_t i) const {
    const Action& a = programs_[rank].actions[i];
    if (!IsReceive(a.kind)) return i < cut[rank];
    return static_cast<size_t>(send_of_[rank][i]) < cut[a.peer.value];
  }

  // Decides which actions of each rank run before its PV. Compute and sends: the longest
  // prefix that is allowed and happens before the rank's PV time. Receives follow their sends,
  // so every transfer has both ends on the same side of PV; a consumer before PV whose receive
  // ends up after it cuts the prefix there. Prefixes only shrink, so this settles.
  void ChoosePrefixes(const std::vector<double>& pv_times) {
    const size_t ranks = programs_.size();
    std::vector<size_t> cut(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      const auto& actions = programs_[r].actions;
      cut[r] = actions.size();
      size_t compute = 0;
      for (size_t i = 0; i < actions.size(); ++i) {
        if (IsReceive(actions[i].kind)) continue;
        if (!AllowedBeforePv(static_cast<int>(r), actions[i]) ||
            TimeOf(static_cast<int>(r), i, compute) >= pv_times[r]) {
          cut[r] = i;
          break;
        }
        if (IsCompute(actions[i].kind)) ++compute;
      }
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (size_t r = 0; r < ranks; ++r) {
        // A consumer before PV needs its receive before PV too.
        for (size_t i = 0; i < std::min(cut[r], programs_[r].actions.size()); ++i) {
          if (!IsCompute(programs_[r].actions[i].kind) ||
              ReceivedBefore(cut, static_cast<int>(r), i)) {
            continue;
          }
          cut[r] = i;
          changed = true;
          break;
        }
      }
    }
    before_.resize(ranks);
    for (size_t r = 0; r < ranks; ++r) {
      before_[r].resize(programs_[r].actions.size());
      for (size_t i = 0; i < before_[r].size(); ++i) {
        before_[r][i] = BeforePv(cut, static_cast<int>(r), i) ? 1 : 0;
      }
    }
  }

  // Whether every receive feeding compute action `index` on `rank` is before PV.
  bool ReceivedBefore(const std::vector<size_t>& cut, int rank, size_t index) const {
    const auto& actions = programs_[rank].actions;
    const Action& consumer = actions[index];
    for (size_t i = 0; i < index; ++i) {
      const Action& a = actions[i];
      if (!IsReceive(a.kind) || BeforePv(cut, rank, i)) continue;
      for (const Action* part : ComputeParts(consumer)) {
        const bool feeds =
            a.stage == part->stage && a.microbatch == part->microbatch &&
            (a.kind == ActionKind::kRecvForward) == (part->kind == ActionKind::kForward);
        if (feeds) return false;
      }
    }
    return true;
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
  std::vector<std::vector<int>> send_of_;     // [rank][receive index]: its send's index
  std::vector<std::vector<uint8_t>> before_;  // [rank][action]: runs before the rank's PV
};

}  // namespace

bool SupportsPostValidation(std::string_view strategy) {
  return std::find(kZeroBubbleFamily.begin(), kZeroBubbleFamily.end(), strategy) !=
         kZeroBubbleFamily.end();
}

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

int CountRollbackReceives(const Plan& plan) {
  int count = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& a : program.actions) count += a.rollback ? 1 : 0;
  }
  return count;
}

}  // namespace pipeplan
