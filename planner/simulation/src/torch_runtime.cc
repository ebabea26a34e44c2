#include "pipeplan/simulation/torch_runtime.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/passes/torch_lowering.h"
#include "pipeplan/passes/transfer_links.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/simulation/timeline_metrics.h"
#include "plan_checks.h"
#include "rank_memory.h"

namespace pipeplan {
namespace {

constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();

// The other end of a transfer: the k-th send on a link with the k-th receive on it.
struct End {
  int rank = -1;  // -1: no other end
  int index = 0;
};

std::vector<std::vector<End>> PairTransfers(const std::vector<RankProgram>& programs) {
  std::vector<std::vector<End>> other(programs.size());
  for (size_t r = 0; r < programs.size(); ++r) other[r].resize(programs[r].actions.size());
  const TransferLinks links(programs);
  for (size_t r = 0; r < programs.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (const TransferLinks::Link& sends : links.SendLinks(rank)) {
      const TransferLinks::Link* receives = links.FindReceiveLink(sends.peer, rank);
      if (receives == nullptr) continue;
      const auto sent = links.Refs(sends);
      const auto received = links.Refs(*receives);
      for (size_t k = 0; k < std::min(sent.size(), received.size()); ++k) {
        other[r][sent[k].index] = {received[k].rank, received[k].index};
        other[received[k].rank][received[k].index] = {rank, sent[k].index};
      }
    }
  }
  return other;
}

// Walks every rank's list in order, one comm stream and one compute stream per rank; a rank
// stops at a transfer whose other end has not been reached yet.
class TorchClock {
 public:
  TorchClock(const Plan& plan, const CostModel& costs)
      : plan_(plan),
        costs_(costs),
        stages_(plan.request.topology),
        other_(PairTransfers(plan.programs)),
        forward_arrival_(stages_.num_stages(), plan.request.topology.microbatches, kNotYet),
        backward_arrival_(stages_.num_stages(), plan.request.topology.microbatches, kNotYet),
        next_(plan.programs.size(), 0),
        compute_free_(plan.programs.size(), 0.0),
        comm_free_(plan.programs.size(), 0.0) {
    ranks_.resize(plan.programs.size());
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].rank = RankId(static_cast<int>(r));
      ranks_[r].actions.resize(plan.programs[r].actions.size());
    }
  }

  StatusOr<std::vector<RankTimeline>> Run() && {
    while (!AllDone()) {
      bool progress = false;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        PIPEPLAN_ASSIGN_OR_RETURN(const bool moved, Advance(static_cast<int>(r)));
        progress = progress || moved;
      }
      if (!progress) return Hang();
    }
    for (size_t r = 0; r < ranks_.size(); ++r) SummarizeComputeTimes(plan_.programs[r], ranks_[r]);
    return std::move(ranks_);
  }

 private:
  const std::vector<Action>& Actions(int rank) const { return plan_.programs[rank].actions; }

  bool AllDone() const {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (next_[r] < Actions(static_cast<int>(r)).size()) return false;
    }
    return true;
  }

  StatusOr<bool> Advance(int rank) {
    bool moved = false;
    while (next_[rank] < Actions(rank).size()) {
      const size_t i = next_[rank];
      const Action& action = Actions(rank)[i];
      if (IsCompute(action.kind)) {
        PIPEPLAN_RETURN_IF_ERROR(TimeCompute(rank, i, action));
      } else {
        const End other = other_[rank][i];
        if (other.rank < 0 || next_[other.rank] != static_cast<size_t>(other.index)) {
          return moved;
        }
        Transfer(rank, i, other);
        ++next_[other.rank];
      }
      ++next_[rank];
      moved = true;
    }
    return moved;
  }

  Status TimeCompute(int rank, size_t index, const Action& action) {
    double start = compute_free_[rank];
    double duration = 0.0;
    for (const Action* part : ComputeParts(action)) {
      const double input = RemoteInput(rank, *part);
      if (std::isnan(input)) {
        return InvalidArgument(Where(rank, index, action) +
                               ": its input's receive has not run before it (run the validator)");
      }
      start = std::max(start, input);
      duration += costs_.ComputeTime(*part);  // an F&B cell's halves run in turn
    }
    ranks_[rank].actions[index] = {start, start + duration};
    compute_free_[rank] = start + duration;
    return Status::Ok();
  }

  // When the input of `part` arrived from another rank; 0 where it is made on this rank (the
  // compute stream runs its producer first) or is the model's own.
  double RemoteInput(int rank, const Action& part) const {
    const StageId s = part.stage;
    if (part.kind == ActionKind::kForward) {
      if (stages_.IsFirst(s) || stages_.RankOf(StageId(s.value - 1)).value == rank) return 0.0;
      return forward_arrival_.At(s, part.microbatch);
    }
    if (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput) {
      if (stages_.IsLast(s) || stages_.RankOf(StageId(s.value + 1)).value == rank) return 0.0;
      return backward_arrival_.At(s, part.microbatch);
    }
    return 0.0;
  }

  // Both ends are reached: the transfer starts once both comm streams are free and what each
  // rank computed before it is done.
  void Transfer(int rank, size_t index, End other) {
    const bool sends = IsSend(Actions(rank)[index].kind);
    const int sender = sends ? rank : other.rank;
    const size_t send_index = sends ? index : static_cast<size_t>(other.index);
    const int receiver = sends ? other.rank : rank;
    const size_t receive_index = sends ? static_cast<size_t>(other.index) : index;
    const Action& send = Actions(sender)[send_index];
    const Action& receive = Actions(receiver)[receive_index];
    const double start = std::max(Ready(sender), Ready(receiver));
    const double transfer = costs_.TransferTime(send.stage, receive.stage);
    const double landed =
        start + std::max(transfer, costs_.ReceiveOverhead(send.stage, receive.stage));
    ranks_[sender].actions[send_index] = {start, start + transfer, kCommThread};
    ranks_[receiver].actions[receive_index] = {start, landed, kCommThread};
    comm_free_[sender] = start + transfer;
    comm_free_[receiver] = landed;
    if (receive.kind == ActionKind::kRecvForward) {
      forward_arrival_.At(receive.stage, receive.microbatch) = landed;
    } else if (receive.kind == ActionKind::kRecvBackward) {
      backward_arrival_.At(receive.stage, receive.microbatch) = landed;
    }
  }

  double Ready(int rank) const { return std::max(comm_free_[rank], compute_free_[rank]); }

  Status Hang() const {
    std::string message =
        "on torch's runtime these lists wait on each other forever (one comm stream per rank: "
        "a transfer starts only when both ends reach it): ";
    bool first = true;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const int rank = static_cast<int>(r);
      if (next_[r] >= Actions(rank).size()) continue;
      const Action& action = Actions(rank)[next_[r]];
      message += (first ? "" : "; ") + Where(rank, next_[r], action) + " waits for rank " +
                 std::to_string(action.peer.value);
      first = false;
    }
    return InvalidArgument(message);
  }

  const Plan& plan_;
  const CostModel& costs_;
  StageMap stages_;
  std::vector<std::vector<End>> other_;
  StageMbTable<double> forward_arrival_;   // by receiving stage: when its RECV_F landed
  StageMbTable<double> backward_arrival_;  // by receiving stage: when its RECV_B landed
  std::vector<size_t> next_;               // per rank: its first action not yet timed
  std::vector<double> compute_free_;       // per rank: end of its last compute so far
  std::vector<double> comm_free_;          // per rank: end of its last transfer so far
  std::vector<RankTimeline> ranks_;
};

Status CheckTorchRuns(const Plan& plan) {
  if (plan.request.topology.placement == Placement::kDual) {
    return InvalidArgument(
        "torch's runtime has one model copy per stage index: a dual-placement plan (dualpipe) "
        "does not run there; dualpipe-v is the single-copy variant it runs");
  }
  if (HasPostValidation(plan)) {
    return InvalidArgument(
        "torch's runtime has no optimizer post-validation: simulate a plan built without "
        "--post-validation");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TorchRuntimeRun> SimulateOnTorchRuntime(const Plan& plan, TorchLists lists,
                                                 const CostModel& costs,
                                                 const MemoryModel& memory) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSimulatable(plan, costs, memory));
  PIPEPLAN_RETURN_IF_ERROR(CheckTorchRuns(plan));
  TorchRuntimeRun run{plan, {}};
  if (lists == TorchLists::kTorchLowering) {
    PIPEPLAN_ASSIGN_OR_RETURN(run.plan.programs,
                              LowerAsTorch(plan.programs, plan.request.topology));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<RankTimeline> ranks, TorchClock(run.plan, costs).Run());
  TrackRankMemory(run.plan.programs, memory, run.plan.request.topology,
                  /*holds_to_step_end=*/true, ranks);
  run.timeline.source = TimelineSource::kSimulated;
  run.timeline.ranks = std::move(ranks);
  run.timeline.metrics = ComputeMetrics(run.timeline.ranks, LowerBound(plan, costs));
  return run;
}

}  // namespace pipeplan
