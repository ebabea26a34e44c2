// Comm insertion. Messages are numbered in the completion order of their producers under a
// deterministic list schedule (when their data is ready). A SEND goes right after its producer; a RECV right before its
// consumer, or earlier when needed so that every rank's comm actions stay sorted by message
// number. Sorted projections of one global order cannot wait on each other in a cycle, even
// when every transfer is a rendezvous.
#include "pipeplan/planner/comm_insertion.h"

#include <algorithm>
#include <limits>
#include <string>

#include "list_schedule.h"
#include "plan_util.h"
#include "stage_mb_table.h"

namespace pipeplan {
namespace {

constexpr int kMissing = -1;

// A comm action waiting to be placed on one rank, before compute action `slot`.
struct PendingComm {
  size_t message = 0;
  int slot = 0;
  bool is_send = false;
  Action action;
};

Action MakeComm(ActionKind kind, StageId stage, MicrobatchId mb, RankId peer) {
  Action action = MakeCompute(kind, stage, mb);
  action.peer = peer;
  return action;
}

class CommInserter {
 public:
  CommInserter(const ComputeOrder& order, const StageMap& stages, int microbatches)
      : order_(order),
        stages_(stages),
        forward_at_(stages.num_stages(), microbatches, kMissing),
        input_grad_at_(stages.num_stages(), microbatches, kMissing),
        pending_(order.size()) {
    IndexConsumers();
  }

  StatusOr<std::vector<RankProgram>> Run(const std::vector<ComputeRef>& global_order) {
    for (const ComputeRef& ref : global_order) {
      const Action& producer = order_[ref.rank][ref.index];
      for (const Action* part : ComputeParts(producer)) {
        PIPEPLAN_RETURN_IF_ERROR(AddMessagesOf(*part, ref));
      }
    }
    for (std::vector<PendingComm>& comms : pending_) PlaceReceivesLate(comms);
    return Assemble();
  }

 private:
  void IndexConsumers() {
    for (size_t r = 0; r < order_.size(); ++r) {
      for (size_t i = 0; i < order_[r].size(); ++i) {
        for (const Action* part : ComputeParts(order_[r][i])) {
          StageMbTable<int>* table = TableFor(part->kind);
          if (table != nullptr && table->Contains(part->stage, part->microbatch)) {
            table->At(part->stage, part->microbatch) = static_cast<int>(i);
          }
        }
      }
    }
  }

  StageMbTable<int>* TableFor(ActionKind kind) {
    switch (kind) {
      case ActionKind::kForward:
        return &forward_at_;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        return &input_grad_at_;
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return nullptr;
    }
    return nullptr;
  }

  // Adds the SEND/RECV pair for the output of `part` if its consumer lives on another rank.
  Status AddMessagesOf(const Action& part, const ComputeRef& producer) {
    const int s = part.stage.value;
    ActionKind send_kind = ActionKind::kSendForward;
    ActionKind recv_kind = ActionKind::kRecvForward;
    StageId consumer_stage;
    const StageMbTable<int>* consumers = nullptr;
    switch (part.kind) {
      case ActionKind::kForward:
        if (stages_.IsLast(part.stage)) return Status::Ok();
        send_kind = ActionKind::kSendForward;
        recv_kind = ActionKind::kRecvForward;
        consumer_stage = StageId(s + 1);
        consumers = &forward_at_;
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (stages_.IsFirst(part.stage)) return Status::Ok();
        send_kind = ActionKind::kSendBackward;
        recv_kind = ActionKind::kRecvBackward;
        consumer_stage = StageId(s - 1);
        consumers = &input_grad_at_;
        break;
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return Status::Ok();
    }
    const RankId sender(producer.rank);
    const RankId receiver = stages_.RankOf(consumer_stage);
    if (receiver == sender) return Status::Ok();  // local hand-off, no comm
    const int consumer_index = consumers->At(consumer_stage, part.microbatch);
    if (consumer_index == kMissing) {
      return InvalidArgument("rank " + std::to_string(receiver.value) + " has no consumer for " +
                             ToString(part) + " of rank " + std::to_string(sender.value));
    }
    const size_t message = next_message_++;
    pending_[sender.value].push_back(
        {message, producer.index + 1, true, MakeComm(send_kind, part.stage, part.microbatch, receiver)});
    pending_[receiver.value].push_back(
        {message, consumer_index, false, MakeComm(recv_kind, consumer_stage, part.microbatch, sender)});
    return Status::Ok();
  }

  // Moves each RECV to min(its consumer, every later-numbered comm action on the rank).
  static void PlaceReceivesLate(std::vector<PendingComm>& comms) {
    std::sort(comms.begin(), comms.end(),
              [](const PendingComm& a, const PendingComm& b) { return a.message < b.message; });
    int earliest_later = std::numeric_limits<int>::max();
    for (auto it = comms.rbegin(); it != comms.rend(); ++it) {
      if (!it->is_send) it->slot = std::min(it->slot, earliest_later);
      earliest_later = std::min(earliest_later, it->slot);
    }
  }

  std::vector<RankProgram> Assemble() const {
    std::vector<RankProgram> programs(order_.size());
    for (size_t r = 0; r < order_.size(); ++r) {
      RankProgram& program = programs[r];
      program.rank = RankId(static_cast<int>(r));
      program.actions.reserve(order_[r].size() + pending_[r].size());
      size_t next_comm = 0;
      const std::vector<PendingComm>& comms = pending_[r];
      for (size_t i = 0; i <= order_[r].size(); ++i) {
        while (next_comm < comms.size() && comms[next_comm].slot <= static_cast<int>(i)) {
          program.actions.push_back(comms[next_comm++].action);
        }
        if (i < order_[r].size()) program.actions.push_back(order_[r][i]);
      }
    }
    return programs;
  }

  const ComputeOrder& order_;
  const StageMap& stages_;
  StageMbTable<int> forward_at_;     // compute index of F(stage, mb) on its rank
  StageMbTable<int> input_grad_at_;  // compute index of B or I(stage, mb) on its rank
  std::vector<std::vector<PendingComm>> pending_;
  size_t next_message_ = 0;
};

int MicrobatchesIn(const ComputeOrder& order) {
  int microbatches = 0;
  for (const auto& actions : order) {
    for (const Action& action : actions) {
      for (const Action* part : ComputeParts(action)) {
        microbatches = std::max(microbatches, part->microbatch.value + 1);
      }
    }
  }
  return microbatches;
}

}  // namespace

StatusOr<std::vector<ComputeRef>> GlobalComputeOrder(const ComputeOrder& order,
                                                     const StageMap& stages, const CostModel& costs) {
  PIPEPLAN_ASSIGN_OR_RETURN(ListScheduleResult schedule,
                            RunListSchedule(order, stages, MicrobatchesIn(order), costs));
  // Completion order; a stable sort keeps start order among equal ends, so zero-cost producers
  // still precede their consumers.
  std::vector<ComputeRef> completion = std::move(schedule.start_order);
  std::stable_sort(completion.begin(), completion.end(), [&](const ComputeRef& a, const ComputeRef& b) {
    return schedule.times[a.rank][a.index].end < schedule.times[b.rank][b.index].end;
  });
  return completion;
}

StatusOr<std::vector<RankProgram>> InsertComm(const ComputeOrder& order, const StageMap& stages,
                                              const CostModel& costs) {
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<ComputeRef> global, GlobalComputeOrder(order, stages, costs));
  return CommInserter(order, stages, MicrobatchesIn(order)).Run(global);
}

}  // namespace pipeplan
