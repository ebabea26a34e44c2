#include "comm_check.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"

namespace pipeplan {
namespace {

// The stage a comm action talks to, and whether the kind is a send.
struct CommShape {
  bool is_send = false;
  int neighbour_offset = 0;  // +1: the next stage, -1: the previous one, 0: PV (stage-less)
};

constexpr CommShape ShapeOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kSendForward:
      return {true, +1};
    case ActionKind::kRecvForward:
      return {false, -1};
    case ActionKind::kSendBackward:
      return {true, -1};
    case ActionKind::kRecvBackward:
      return {false, +1};
    case ActionKind::kSendPostValidation:
      return {true, 0};
    case ActionKind::kRecvPostValidation:
      return {false, 0};
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
    case ActionKind::kPostValidation:
      return {};
  }
  return {};
}

// Whether `recv` is the receive that pairs with `send` from `sender`: same microbatch,
// neighbouring stage, mirrored kind. Compares fields: this runs once per transfer.
bool IsMatchingReceive(const Action& send, RankId sender, const Action& recv) {
  if (recv.peer != sender) return false;
  switch (send.kind) {
    case ActionKind::kSendForward:
      return recv.kind == ActionKind::kRecvForward && recv.stage.value == send.stage.value + 1 &&
             recv.microbatch == send.microbatch;
    case ActionKind::kSendBackward:
      return recv.kind == ActionKind::kRecvBackward && recv.stage.value == send.stage.value - 1 &&
             recv.microbatch == send.microbatch;
    case ActionKind::kSendPostValidation:
      // PV actions carry the chunk-0 stage of their rank, which is the rank's index.
      return recv.kind == ActionKind::kRecvPostValidation &&
             recv.stage.value == send.stage.value - 1;
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
    case ActionKind::kRecvForward:
    case ActionKind::kRecvBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kRecvPostValidation:
      return false;
  }
  return false;
}

// 32-bit index: a rank's program stays far below 2^32 actions (requests are capped), and
// halving the entry halves what the per-link lists move around.
struct CommRef {
  int rank;
  uint32_t index;
};

// Transfers on one rank, grouped by the other end of the link, in program order. A rank has
// a handful of peers, so a short vector searched linearly is the cheapest map.
class LinkLists {
 public:
  struct Link {
    int peer;
    std::vector<CommRef> refs;
  };
  std::vector<CommRef>& For(int peer) {
    for (Link& link : links_) {
      if (link.peer == peer) return link.refs;
    }
    links_.push_back({peer, {}});
    return links_.back().refs;
  }
  const std::vector<CommRef>* Find(int peer) const {
    for (const Link& link : links_) {
      if (link.peer == peer) return &link.refs;
    }
    return nullptr;
  }
  const std::vector<Link>& links() const { return links_; }

 private:
  std::vector<Link> links_;
};

class CommChecker {
 public:
  explicit CommChecker(const Plan& plan)
      : plan_(plan),
        stages_(plan.request.topology),
        sends_(plan.programs.size()),
        recvs_(plan.programs.size()) {}

  Status Check() {
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      const auto& actions = plan_.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        if (!IsComm(actions[i].kind)) continue;
        const CommShape shape = ShapeOf(actions[i].kind);
        PIPEPLAN_RETURN_IF_ERROR(CheckEndpoint(static_cast<int>(r), i, actions[i], shape));
        (shape.is_send ? sends_ : recvs_)[r]
            .For(actions[i].peer.value)
            .push_back({static_cast<int>(r), static_cast<uint32_t>(i)});
      }
    }
    // Data flow first: a missing receive is better reported at its consumer.
    PIPEPLAN_RETURN_IF_ERROR(CheckDataFlow());
    return CheckPairing();
  }

 private:
  const Action& At(const CommRef& ref) const { return plan_.programs[ref.rank].actions[ref.index]; }

  Status CheckEndpoint(int rank, size_t index, const Action& action, const CommShape& shape) const {
    const auto where = [&] { return Where(rank, index, action); };
    const int ranks = static_cast<int>(plan_.programs.size());
    if (action.peer.value < 0 || action.peer.value >= ranks) {
      return InvalidArgument(where() + ": peer rank " + std::to_string(action.peer.value) +
                             " out of range 0.." + std::to_string(ranks - 1));
    }
    if (action.peer.value == rank) return InvalidArgument(where() + ": sends to its own rank");
    if (shape.neighbour_offset == 0) {
      // The validation state travels from the last rank down to rank 0.
      const int expected = shape.is_send ? rank - 1 : rank + 1;
      if (action.peer.value != expected) {
        return InvalidArgument(
            where() + ": post-validation state goes from rank r+1 to rank r; peer must be rank " +
            std::to_string(expected));
      }
      return Status::Ok();
    }
    const int stage = action.stage.value;
    const int neighbour = stage + shape.neighbour_offset;
    if (stage < 0 || stage >= stages_.num_stages()) {
      return InvalidArgument(where() + ": stage " + std::to_string(stage) + " out of range 0.." +
                             std::to_string(stages_.num_stages() - 1));
    }
    const int microbatches = stages_.MicrobatchesOf(StageId(stage));
    if (action.microbatch.value < 0 || action.microbatch.value >= microbatches) {
      return InvalidArgument(where() + ": microbatch " + std::to_string(action.microbatch.value) +
                             " out of range 0.." + std::to_string(microbatches - 1));
    }
    if (stages_.RankOf(StageId(stage)) != RankId(rank)) {
      return InvalidArgument(where() + ": stage " + std::to_string(stage) + " belongs to rank " +
                             std::to_string(stages_.RankOf(StageId(stage)).value));
    }
    const bool at_end = shape.neighbour_offset > 0 ? stages_.IsLast(StageId(stage))
                                                   : stages_.IsFirst(StageId(stage));
    if (at_end) {
      return InvalidArgument(where() + ": stage " + std::to_string(stage) + " has no stage " +
                             std::to_string(neighbour) + " to talk to");
    }
    const RankId expected = stages_.RankOf(StageId(neighbour));
    if (expected == RankId(rank)) {
      return InvalidArgument(where() + ": stages " + std::to_string(stage) + " and " +
                             std::to_string(neighbour) +
                             " are on the same rank; they hand over locally");
    }
    if (action.peer != expected) {
      return InvalidArgument(where() + ": peer is rank " + std::to_string(action.peer.value) +
                             " but stage " + std::to_string(neighbour) + " is on rank " +
                             std::to_string(expected.value));
    }
    return Status::Ok();
  }

  // The k-th send from a to b must match the k-th receive on b from a (NCCL matches by order).
  Status CheckPairing() const {
    for (size_t from = 0; from < sends_.size(); ++from) {
      for (const LinkLists::Link& link : sends_[from].links()) {
        PIPEPLAN_RETURN_IF_ERROR(CheckLink(static_cast<int>(from), link.peer, link.refs));
      }
    }
    for (size_t to = 0; to < recvs_.size(); ++to) {
      for (const LinkLists::Link& link : recvs_[to].links()) {
        if (sends_[link.peer].Find(static_cast<int>(to)) == nullptr) {
          const CommRef& first = link.refs[0];
          return InvalidArgument(Where(first.rank, first.index, At(first)) +
                                 ": no send from rank " + std::to_string(link.peer) +
                                 " matches it");
        }
      }
    }
    return Status::Ok();
  }

  Status CheckLink(int from, int to, const std::vector<CommRef>& sends) const {
    const std::vector<CommRef>* recvs = recvs_[to].Find(from);
    const size_t recv_count = recvs == nullptr ? 0 : recvs->size();
    auto link = [&] { return "rank " + std::to_string(from) + " -> rank " + std::to_string(to); };
    for (size_t k = 0; k < sends.size(); ++k) {
      const Action& send = At(sends[k]);
      if (k >= recv_count) {
        return InvalidArgument(link() + ": " + Where(sends[k].rank, sends[k].index, send) +
                               " has no matching receive (send #" + std::to_string(k) + ")");
      }
      const CommRef& recv_ref = (*recvs)[k];
      if (!IsMatchingReceive(send, RankId(from), At(recv_ref))) {
        return InvalidArgument(link() + ": send #" + std::to_string(k) + " is " +
                               Where(sends[k].rank, sends[k].index, send) + " but receive #" +
                               std::to_string(k) + " is " +
                               Where(recv_ref.rank, recv_ref.index, At(recv_ref)) +
                               "; receives must come in the order of the sends");
      }
    }
    if (recv_count > sends.size()) {
      const CommRef& extra = (*recvs)[sends.size()];
      return InvalidArgument(link() + ": " + Where(extra.rank, extra.index, At(extra)) +
                             " has no matching send");
    }
    return Status::Ok();
  }

  // Every cross-rank input is received before its consumer and sent after its producer.
  Status CheckDataFlow() const {
    const Topology& topology = plan_.request.topology;
    StageMbTable<int> forward_sent(topology.num_stages(), topology.microbatches, 0);
    StageMbTable<int> backward_sent(topology.num_stages(), topology.microbatches, 0);
    StageMbTable<int> forward_received(topology.num_stages(), topology.microbatches, 0);
    StageMbTable<int> backward_received(topology.num_stages(), topology.microbatches, 0);
    StageMbTable<uint8_t> forward_done(topology.num_stages(), topology.microbatches, 0);
    StageMbTable<uint8_t> backward_done(topology.num_stages(), topology.microbatches, 0);
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      const auto& actions = plan_.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        const auto where = [&] { return Where(static_cast<int>(r), i, a); };
        switch (a.kind) {
          case ActionKind::kSendForward:
            if (!forward_done.At(a.stage, a.microbatch)) {
              return InvalidArgument(where() + ": sends an activation before its forward ran");
            }
            ++forward_sent.At(a.stage, a.microbatch);
            break;
          case ActionKind::kSendBackward:
            if (!backward_done.At(a.stage, a.microbatch)) {
              return InvalidArgument(where() + ": sends a gradient before its backward ran");
            }
            ++backward_sent.At(a.stage, a.microbatch);
            break;
          case ActionKind::kRecvForward:
            ++forward_received.At(a.stage, a.microbatch);
            break;
          case ActionKind::kRecvBackward:
            ++backward_received.At(a.stage, a.microbatch);
            break;
          case ActionKind::kForward:
          case ActionKind::kBackward:
          case ActionKind::kBackwardInput:
          case ActionKind::kOverlapFB:
            for (const Action* part : ComputeParts(a)) {
              PIPEPLAN_RETURN_IF_ERROR(CheckInputReceived(
                  where, *part, forward_received, backward_received, forward_done, backward_done));
              if (part->kind == ActionKind::kForward) {
                forward_done.At(part->stage, part->microbatch) = 1;
              } else {
                backward_done.At(part->stage, part->microbatch) = 1;
              }
            }
            break;
          case ActionKind::kBackwardWeight:
          case ActionKind::kPostValidation:
          case ActionKind::kSendPostValidation:
          case ActionKind::kRecvPostValidation:
            break;
        }
      }
    }
    return CheckEverySentOnce(forward_sent, backward_sent);
  }

  template <typename WhereFn>
  Status CheckInputReceived(const WhereFn& where, const Action& part,
                            const StageMbTable<int>& forward_received,
                            const StageMbTable<int>& backward_received,
                            const StageMbTable<uint8_t>& forward_done,
                            const StageMbTable<uint8_t>& backward_done) const {
    const int s = part.stage.value;
    if (part.kind == ActionKind::kForward) {
      if (stages_.IsFirst(part.stage)) return Status::Ok();
      const StageId producer(s - 1);
      if (stages_.RankOf(producer) == stages_.RankOf(part.stage)) {
        return CheckLocalInput(where, part, producer, forward_done, "forward");
      }
      if (forward_received.At(part.stage, part.microbatch) != 1) {
        return InvalidArgument(where() + ": forward without a RECV_F of its input before it");
      }
      return Status::Ok();
    }
    if (stages_.IsLast(part.stage)) return Status::Ok();
    const StageId producer(s + 1);
    if (stages_.RankOf(producer) == stages_.RankOf(part.stage)) {
      return CheckLocalInput(where, part, producer, backward_done, "backward");
    }
    if (backward_received.At(part.stage, part.microbatch) != 1) {
      return InvalidArgument(where() + ": backward without a RECV_B of its gradient before it");
    }
    return Status::Ok();
  }

  // A neighbour on the same rank hands its output over in memory: its action must come earlier
  // in this rank's program (programs are walked rank by rank, so `done` holds only this rank's
  // earlier actions for its own stages). Without this a plan may wait on itself.
  template <typename WhereFn>
  static Status CheckLocalInput(const WhereFn& where, const Action& part, StageId producer,
                                const StageMbTable<uint8_t>& done, const char* pass) {
    if (done.At(producer, part.microbatch)) return Status::Ok();
    return InvalidArgument(where() + ": needs the " + pass + " of stage " +
                           std::to_string(producer.value) + " microbatch " +
                           std::to_string(part.microbatch.value) +
                           ", which this rank runs later (a local hand-over must come first)");
  }

  Status CheckEverySentOnce(const StageMbTable<int>& forward_sent,
                            const StageMbTable<int>& backward_sent) const {
    const Topology& topology = plan_.request.topology;
    for (int s = 0; s < topology.num_stages(); ++s) {
      const RankId rank = stages_.RankOf(StageId(s));
      const bool forward_remote =
          !stages_.IsLast(StageId(s)) && stages_.RankOf(StageId(s + 1)) != rank;
      const bool backward_remote =
          !stages_.IsFirst(StageId(s)) && stages_.RankOf(StageId(s - 1)) != rank;
      for (int m = 0; m < stages_.MicrobatchesOf(StageId(s)); ++m) {
        const auto what = [&] {
          return std::string("stage " + std::to_string(s) + " microbatch " + std::to_string(m) +
                             " (rank " + std::to_string(rank.value) + ")");
        };
        if (forward_sent.At(StageId(s), MicrobatchId(m)) != (forward_remote ? 1 : 0)) {
          return InvalidArgument(
              what() + ": its activation must be sent exactly once to rank " +
              std::to_string(forward_remote ? stages_.RankOf(StageId(s + 1)).value : rank.value));
        }
        if (backward_sent.At(StageId(s), MicrobatchId(m)) != (backward_remote ? 1 : 0)) {
          return InvalidArgument(
              what() + ": its gradient must be sent exactly once to rank " +
              std::to_string(backward_remote ? stages_.RankOf(StageId(s - 1)).value : rank.value));
        }
      }
    }
    return Status::Ok();
  }

  const Plan& plan_;
  StageMap stages_;
  std::vector<LinkLists> sends_;  // per sender: sends to each peer, in order
  std::vector<LinkLists> recvs_;  // per receiver: receives from each peer, in order
};

}  // namespace

Status CheckComm(const Plan& plan) { return CommChecker(plan).Check(); }

}  // namespace pipeplan
