// Deadlock dry run under the strictest semantics a runtime may have: each maximal run of
// consecutive comm actions is one group (ncclGroupStart/End) that completes only when every
// transfer in it is matched by the peer's posted counterpart; compute never blocks (the
// validator has already checked that inputs are received before use).
#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "pipeplan/planner/validator.h"
#include "plan_util.h"

namespace pipeplan {
namespace {

bool IsSendKind(ActionKind kind) {
  return kind == ActionKind::kSendForward || kind == ActionKind::kSendBackward ||
         kind == ActionKind::kSendPostValidation;
}

struct CommOp {
  size_t index = 0;  // in the rank's program
  int peer = 0;
  bool is_send = false;
  // Where the matching transfer sits: the k-th send on a link pairs with its k-th receive.
  // -1 when there is none (the validator reports that case before the dry run).
  int counterpart_rank = -1;
  size_t counterpart_segment = 0;
  size_t segment = 0;  // the group this op belongs to
};

// One rank's program as segments: a compute action (no ops) or a group of comm ops.
struct RankSegments {
  std::vector<CommOp> ops;
  std::vector<size_t> segment_start;  // segment k covers ops[start[k], start[k + 1])

  size_t size() const { return segment_start.size() - 1; }
  const CommOp* begin(size_t k) const { return ops.data() + segment_start[k]; }
  const CommOp* end(size_t k) const { return ops.data() + segment_start[k + 1]; }
};

class DryRunner {
 public:
  explicit DryRunner(const Plan& plan) : plan_(plan) {
    const size_t ranks = plan.programs.size();
    segments_.resize(ranks);
    head_.assign(ranks, 0);
    queued_.assign(ranks, 0);
    BuildSegments();
    PairOps();
  }

  Status Run() {
    for (size_t r = 0; r < segments_.size(); ++r) Wake(static_cast<int>(r));
    while (!work_.empty()) {
      const int rank = work_.front();
      work_.pop_front();
      queued_[rank] = 0;
      const size_t start = head_[rank];
      while (head_[rank] < segments_[rank].size() && Blocking(rank) == nullptr) ++head_[rank];
      // Peers waiting on what this rank has now posted get another look.
      if (head_[rank] != start) WakePeersOf(rank, start);
    }
    for (size_t r = 0; r < segments_.size(); ++r) {
      if (head_[r] < segments_[r].size()) return Deadlock(static_cast<int>(r));
    }
    return Status::Ok();
  }

 private:
  void BuildSegments() {
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      RankSegments& out = segments_[r];
      bool in_group = false;
      const auto& actions = plan_.programs[r].actions;
      out.ops.reserve(actions.size());
      out.segment_start.reserve(actions.size() + 1);
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& action = actions[i];
        if (!IsComm(action.kind)) {
          out.segment_start.push_back(out.ops.size());
          in_group = false;
          continue;
        }
        if (!in_group) out.segment_start.push_back(out.ops.size());
        in_group = true;
        out.ops.push_back(
            {i, action.peer.value, IsSendKind(action.kind), -1, 0, out.segment_start.size() - 1});
      }
      out.segment_start.push_back(out.ops.size());
    }
  }

  // Pairs the k-th send on each link with the k-th receive on it.
  void PairOps() {
    struct Pending {
      int from;
      int to;
      std::vector<std::pair<int, size_t>> sends;  // (rank, op index) in order
      std::vector<std::pair<int, size_t>> recvs;
    };
    std::vector<std::vector<Pending*>> links_of(segments_.size());  // by sender, small lists
    std::deque<Pending> links;
    auto link = [&](int from, int to) -> Pending& {
      for (Pending* p : links_of[from]) {
        if (p->to == to) return *p;
      }
      links.push_back({from, to, {}, {}});
      links_of[from].push_back(&links.back());
      return links.back();
    };
    for (size_t r = 0; r < segments_.size(); ++r) {
      const int rank = static_cast<int>(r);
      for (size_t o = 0; o < segments_[r].ops.size(); ++o) {
        const CommOp& op = segments_[r].ops[o];
        if (op.peer < 0 || op.peer >= static_cast<int>(segments_.size())) continue;
        if (op.is_send) {
          link(rank, op.peer).sends.emplace_back(rank, o);
        } else {
          link(op.peer, rank).recvs.emplace_back(rank, o);
        }
      }
    }
    for (const Pending& p : links) {
      for (size_t k = 0; k < std::min(p.sends.size(), p.recvs.size()); ++k) {
        CommOp& send = segments_[p.sends[k].first].ops[p.sends[k].second];
        CommOp& recv = segments_[p.recvs[k].first].ops[p.recvs[k].second];
        send.counterpart_rank = p.to;
        send.counterpart_segment = recv.segment;
        recv.counterpart_rank = p.from;
        recv.counterpart_segment = send.segment;
      }
    }
  }

  void Wake(int rank) {
    if (queued_[rank]) return;
    queued_[rank] = 1;
    work_.push_back(rank);
  }

  void WakePeersOf(int rank, size_t from_segment) {
    const RankSegments& segments = segments_[rank];
    const size_t last = std::min(head_[rank], segments.size() - 1);
    for (size_t k = from_segment; k <= last; ++k) {
      for (const CommOp* op = segments.begin(k); op != segments.end(k); ++op) {
        if (op->counterpart_rank >= 0) Wake(op->counterpart_rank);
      }
    }
  }

  // A transfer is matched once the peer's head has reached the group holding its counterpart
  // (a group is posted as soon as the rank reaches it).
  bool Matched(const CommOp& op) const {
    return op.counterpart_rank >= 0 && head_[op.counterpart_rank] >= op.counterpart_segment;
  }

  // The first op of the rank's head group whose counterpart is not posted yet.
  const CommOp* Blocking(int rank) const {
    const RankSegments& segments = segments_[rank];
    for (const CommOp* op = segments.begin(head_[rank]); op != segments.end(head_[rank]); ++op) {
      if (!Matched(*op)) return op;
    }
    return nullptr;
  }

  std::string Describe(int rank, const CommOp& op) const {
    const Action& action = plan_.programs[rank].actions[op.index];
    return Where(rank, op.index, action) + " waits for rank " + std::to_string(op.peer);
  }

  Status Deadlock(int start) const {
    // Follow wait-for edges until a rank repeats: that loop is the cycle to report.
    std::vector<int> path;
    std::vector<bool> seen(segments_.size(), false);
    int rank = start;
    while (rank >= 0 && !seen[rank] && head_[rank] < segments_[rank].size()) {
      seen[rank] = true;
      path.push_back(rank);
      const CommOp* op = Blocking(rank);
      rank = op != nullptr ? op->peer : -1;
    }
    size_t first = 0;
    while (first < path.size() && path[first] != rank) ++first;
    if (first == path.size()) first = 0;
    std::string message = "deadlock: ";
    for (size_t i = first; i < path.size(); ++i) {
      if (i > first) message += "; ";
      const CommOp* op = Blocking(path[i]);
      if (op != nullptr) message += Describe(path[i], *op);
    }
    return InvalidArgument(message);
  }

  const Plan& plan_;
  std::vector<RankSegments> segments_;
  std::vector<size_t> head_;
  std::vector<uint8_t> queued_;
  std::deque<int> work_;
};

}  // namespace

Status DryRun(const Plan& plan) { return DryRunner(plan).Run(); }

}  // namespace pipeplan
