// Comm insertion. Messages are numbered in the completion order of their producers under a
// deterministic list schedule (when their data is ready). A SEND goes right after its producer; a
// RECV right before its consumer, or earlier when needed so that every rank's comm actions stay
// sorted by message number. Sorted projections of one global order cannot wait on each other in a
// cycle, even when every transfer is a rendezvous.
#include "pipeplan/passes/comm_insertion.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/passes/list_schedule.h"
#include "pipeplan/passes/scheduled_passes.h"

namespace pipeplan {
namespace {

constexpr int kMissing = -1;

// A comm action waiting to be placed on one rank, before compute action `slot`: 12 bytes of
// plain data, since these lists hold every comm action of the plan and writing them is a
// good part of what comm insertion costs. The peer follows from the stage and the kind, and
// a stage fits 24 bits (requests are capped at 4096 ranks x 64 stages per rank); the Action
// is made only when the program is assembled.
class PendingComm {
 public:
  PendingComm(int at, ActionKind kind, StageId stage, MicrobatchId mb)
      : slot(at),
        microbatch_(mb.value),
        stage_and_kind_((static_cast<uint32_t>(stage.value) << 8) | static_cast<uint32_t>(kind)) {}

  ActionKind kind() const { return static_cast<ActionKind>(stage_and_kind_ & 0xffu); }
  bool is_receive() const {
    return kind() == ActionKind::kRecvForward || kind() == ActionKind::kRecvBackward;
  }
  Action ToAction(const StageMap& stages) const {
    const StageId stage(static_cast<int>(stage_and_kind_ >> 8));
    Action action = MakeCompute(kind(), stage, MicrobatchId(microbatch_));
    // SEND_F and RECV_B talk to the next stage, RECV_F and SEND_B to the previous one.
    const bool next = kind() == ActionKind::kSendForward || kind() == ActionKind::kRecvBackward;
    action.peer = stages.RankOf(StageId(stage.value + (next ? 1 : -1)));
    return action;
  }

  int slot;

 private:
  int microbatch_;
  uint32_t stage_and_kind_;
};
static_assert(sizeof(PendingComm) == 12);

class CommInserter {
 public:
  CommInserter(const ComputeOrder& order, const StageMap& stages, int microbatches,
               const ListScheduleResult& schedule, ReceivePlacement placement)
      : order_(order),
        stages_(stages),
        schedule_(schedule),
        placement_(placement),
        forward_at_(stages.num_stages(), microbatches, kMissing),
        input_grad_at_(stages.num_stages(), microbatches, kMissing),
        pending_(order.size()) {
    // Each compute part sends at most one message and receives at most one.
    for (size_t r = 0; r < order.size(); ++r) pending_[r].reserve(2 * order[r].size());
    IndexConsumers();
  }

  // `order` is the one the inserter was built on; its actions are moved out at the end.
  StatusOr<std::vector<RankProgram>> Run(const std::vector<ComputeRef>& global_order,
                                         ComputeOrder& order) {
    for (const ComputeRef& ref : global_order) {
      const Action& producer = order_[ref.rank][ref.index];
      for (const Action* part : ComputeParts(producer)) {
        PIPEPLAN_RETURN_IF_ERROR(AddMessagesOf(*part, ref));
      }
    }
    for (std::vector<PendingComm>& comms : pending_) PlaceReceivesLate(comms);
    return Assemble(order);
  }

 private:
  void IndexConsumers() {
    for (const std::vector<Action>& rank_order : order_) {
      for (size_t i = 0; i < rank_order.size(); ++i) {
        for (const Action* part : ComputeParts(rank_order[i])) {
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
    // Messages arrive here in global order, so every rank's list stays sorted by message.
    pending_[sender.value].emplace_back(producer.index + 1, send_kind, part.stage, part.microbatch);
    pending_[receiver.value].emplace_back(ReceiveSlot(receiver.value, consumer_index, producer),
                                          recv_kind, consumer_stage, part.microbatch);
    return Status::Ok();
  }

  // Before its consumer; under kWhenSent no later than the receiver's first compute that ends
  // after the producer (by the list schedule's clock).
  int ReceiveSlot(int receiver, int consumer_index, const ComputeRef& producer) const {
    if (placement_ == ReceivePlacement::kBeforeConsumer) return consumer_index;
    const double sent = schedule_.At(producer.rank, static_cast<size_t>(producer.index)).end;
    const auto ends = schedule_.Rank(receiver);
    const auto after =
        std::upper_bound(ends.begin(), ends.end(), sent,
                         [](double t, const ScheduledCompute& compute) { return t < compute.end; });
    return std::min(consumer_index, static_cast<int>(after - ends.begin()));
  }

  // Moves each RECV to min(its consumer, every later-numbered comm action on the rank).
  static void PlaceReceivesLate(std::vector<PendingComm>& comms) {
    int earliest_later = std::numeric_limits<int>::max();
    for (auto it = comms.rbegin(); it != comms.rend(); ++it) {
      if (it->is_receive()) it->slot = std::min(it->slot, earliest_later);
      earliest_later = std::min(earliest_later, it->slot);
    }
  }

  std::vector<RankProgram> Assemble(ComputeOrder& order) const {
    std::vector<RankProgram> programs(order_.size());
    for (size_t r = 0; r < order_.size(); ++r) {
      RankProgram& program = programs[r];
      program.rank = RankId(static_cast<int>(r));
      program.actions.reserve(order_[r].size() + pending_[r].size());
      size_t next_comm = 0;
      const std::vector<PendingComm>& comms = pending_[r];
      for (size_t i = 0; i <= order_[r].size(); ++i) {
        while (next_comm < comms.size() && comms[next_comm].slot <= static_cast<int>(i)) {
          program.actions.push_back(comms[next_comm++].ToAction(stages_));
        }
        if (i < order_[r].size()) program.actions.push_back(std::move(order[r][i]));
      }
    }
    return programs;
  }

  const ComputeOrder& order_;
  const StageMap& stages_;
  const ListScheduleResult& schedule_;
  ReceivePlacement placement_;
  StageMbTable<int> forward_at_;                   // compute index of F(stage, mb) on its rank
  StageMbTable<int> input_grad_at_;                // compute index of B or I(stage, mb) on its rank
  std::vector<std::vector<PendingComm>> pending_;  // per rank, in message order
};

int MaxMicrobatches(const StageMap& stages) {
  int microbatches = 0;
  for (int s = 0; s < stages.num_stages(); ++s) {
    microbatches = std::max(microbatches, stages.MicrobatchesOf(StageId(s)));
  }
  return microbatches;
}

}  // namespace

StatusOr<std::vector<ComputeRef>> GlobalComputeOrder(const ComputeOrder& order,
                                                     const StageMap& stages,
                                                     const CostModel& costs) {
  const ComputeView view = ViewOf(order);
  PIPEPLAN_ASSIGN_OR_RETURN(ListScheduleResult schedule, RunListSchedule(view, stages, costs));
  return CompletionOrder(schedule);
}

StatusOr<std::vector<RankProgram>> InsertComm(ComputeOrder order, const StageMap& stages,
                                              const CostModel& costs) {
  ListScheduleResult schedule;
  return InsertComm(std::move(order), stages, costs, schedule);
}

StatusOr<std::vector<RankProgram>> InsertComm(ComputeOrder order, const StageMap& stages,
                                              const CostModel& costs, ListScheduleResult& schedule,
                                              ReceivePlacement placement) {
  const ComputeView view = ViewOf(order);
  PIPEPLAN_ASSIGN_OR_RETURN(schedule, RunListSchedule(view, stages, costs));
  const std::vector<ComputeRef> global = CompletionOrder(schedule);
  return CommInserter(order, stages, MaxMicrobatches(stages), schedule, placement)
      .Run(global, order);
}

}  // namespace pipeplan
