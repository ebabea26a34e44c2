#include "pipeplan/passes/torch_lowering.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"

namespace pipeplan {
namespace {

// One rank's compute actions still to take, front first.
struct Pending {
  std::vector<const Action*> actions;
  size_t next = 0;

  bool done() const { return next == actions.size(); }
  const Action& front() const { return *actions[next]; }
};

class TorchLowering {
 public:
  explicit TorchLowering(const Topology& topology)
      : stages_(topology),
        forward_input_(topology.num_stages(), topology.microbatches, 0),
        backward_input_(topology.num_stages(), topology.microbatches, 0) {}

  StatusOr<std::vector<RankProgram>> Lower(const std::vector<RankProgram>& programs) {
    std::vector<Pending> pending(programs.size());
    out_.resize(programs.size());
    for (size_t r = 0; r < programs.size(); ++r) {
      out_[r].rank = RankId(static_cast<int>(r));
      for (const Action& action : programs[r].actions) {
        if (action.kind == ActionKind::kPostValidation) {
          return InvalidArgument("torch's runtime has no post-validation: plan without it");
        }
        if (IsCompute(action.kind)) pending[r].actions.push_back(&action);
      }
    }
    while (!AllDone(pending)) {
      bool progress = false;
      for (size_t r = 0; r < pending.size(); ++r) {
        if (pending[r].done() || !Ready(pending[r].front())) continue;
        Take(static_cast<int>(r), pending[r].front());
        ++pending[r].next;
        progress = true;
      }
      if (!progress) return Stuck(pending);
    }
    return std::move(out_);
  }

 private:
  static bool AllDone(const std::vector<Pending>& pending) {
    for (const Pending& p : pending) {
      if (!p.done()) return false;
    }
    return true;
  }

  // A forward's input is there once the previous stage's forward was taken (its RECV, or the
  // in-memory hand-over, is then in this rank's list); a backward's once the next stage's was.
  bool Ready(const Action& action) const {
    for (const Action* part : ComputeParts(action)) {
      if (part->kind == ActionKind::kForward && !stages_.IsFirst(part->stage) &&
          !forward_input_.At(part->stage, part->microbatch)) {
        return false;
      }
      if (TakesGradient(part->kind) && !stages_.IsLast(part->stage) &&
          !backward_input_.At(part->stage, part->microbatch)) {
        return false;
      }
    }
    return true;
  }

  // B and I consume the next stage's input gradient and produce their own; W neither.
  static bool TakesGradient(ActionKind kind) {
    return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput;
  }

  void Take(int rank, const Action& action) {
    out_[rank].actions.push_back(action);
    for (const Action* part : ComputeParts(action)) {
      if (part->kind == ActionKind::kForward && !stages_.IsLast(part->stage)) {
        const StageId next(part->stage.value + 1);
        forward_input_.At(next, part->microbatch) = 1;
        Hand(rank, *part, next, ActionKind::kSendForward, ActionKind::kRecvForward);
      }
      if (TakesGradient(part->kind) && !stages_.IsFirst(part->stage)) {
        const StageId previous(part->stage.value - 1);
        backward_input_.At(previous, part->microbatch) = 1;
        Hand(rank, *part, previous, ActionKind::kSendBackward, ActionKind::kRecvBackward);
      }
    }
  }

  // The SEND after the producer on its rank, the RECV at the end of the consumer's list so
  // far; nothing where both stages are on one rank.
  void Hand(int rank, const Action& producer, StageId consumer, ActionKind send, ActionKind recv) {
    const int peer = stages_.RankOf(consumer).value;
    if (peer == rank) return;
    Action sent = MakeCompute(send, producer.stage, producer.microbatch);
    sent.peer = RankId(peer);
    out_[rank].actions.push_back(sent);
    Action received = MakeCompute(recv, consumer, producer.microbatch);
    received.peer = RankId(rank);
    out_[peer].actions.push_back(received);
  }

  Status Stuck(const std::vector<Pending>& pending) const {
    std::string message =
        "torch's lowering (_add_send_recv) cannot place the transfers of this compute order: ";
    bool first = true;
    for (size_t r = 0; r < pending.size(); ++r) {
      if (pending[r].done()) continue;
      if (!first) message += "; ";
      first = false;
      message += "rank " + std::to_string(r) + " waits at " + ToString(pending[r].front()) +
                 " for its input";
    }
    return InvalidArgument(message);
  }

  StageMap stages_;
  StageMbTable<uint8_t> forward_input_;   // by consuming stage: the previous stage's F taken
  StageMbTable<uint8_t> backward_input_;  // by consuming stage: the next stage's B or I taken
  std::vector<RankProgram> out_;
};

}  // namespace

StatusOr<std::vector<RankProgram>> LowerAsTorch(const std::vector<RankProgram>& programs,
                                                const Topology& topology) {
  if (topology.placement == Placement::kDual) {
    return InvalidArgument(
        "torch's runtime has one model copy per stage index; a dual placement (dualpipe) "
        "cannot be lowered");
  }
  return TorchLowering(topology).Lower(programs);
}

}  // namespace pipeplan
