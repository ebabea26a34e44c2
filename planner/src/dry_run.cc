// Deadlock dry run under the strictest semantics a runtime may have: each maximal run of
// consecutive comm actions is one group (ncclGroupStart/End) that completes only when every
// transfer in it is matched by the peer's posted counterpart; compute never blocks (the
// validator has already checked that inputs are received before use).
#include <deque>
#include <map>
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
  size_t ordinal = 0;  // k-th transfer on this (from, to) link, in program order
};

struct Segment {
  std::vector<CommOp> group;  // empty: a compute action
};

class DryRunner {
 public:
  explicit DryRunner(const Plan& plan) : plan_(plan) {
    const size_t ranks = plan.programs.size();
    segments_.resize(ranks);
    head_.assign(ranks, 0);
    posted_.resize(ranks);
    queued_.assign(ranks, false);
    BuildSegments();
  }

  Status Run() {
    for (size_t r = 0; r < segments_.size(); ++r) {
      PostHead(static_cast<int>(r));
      Wake(static_cast<int>(r));
    }
    while (!work_.empty()) {
      const int rank = work_.front();
      work_.pop_front();
      queued_[rank] = false;
      while (head_[rank] < segments_[rank].size() && CanComplete(rank)) {
        ++head_[rank];
        PostHead(rank);
      }
    }
    for (size_t r = 0; r < segments_.size(); ++r) {
      if (head_[r] < segments_[r].size()) return Deadlock(static_cast<int>(r));
    }
    return Status::Ok();
  }

 private:
  void BuildSegments() {
    std::map<std::pair<int, int>, size_t> sends;  // (from, to) -> count so far
    std::map<std::pair<int, int>, size_t> recvs;
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      const int rank = static_cast<int>(r);
      bool in_group = false;
      for (size_t i = 0; i < plan_.programs[r].actions.size(); ++i) {
        const Action& action = plan_.programs[r].actions[i];
        if (!IsComm(action.kind)) {
          segments_[r].push_back({});
          in_group = false;
          continue;
        }
        if (!in_group) segments_[r].push_back({});
        in_group = true;
        const bool is_send = IsSendKind(action.kind);
        const int peer = action.peer.value;
        const auto link = is_send ? std::make_pair(rank, peer) : std::make_pair(peer, rank);
        const size_t ordinal = (is_send ? sends : recvs)[link]++;
        segments_[r].back().group.push_back({i, peer, is_send, ordinal});
      }
    }
  }

  // Counts what a rank has posted so far on each (peer, direction).
  size_t& Posted(int rank, int peer, bool is_send) { return posted_[rank][{peer, is_send}]; }
  size_t PostedOr0(int rank, int peer, bool is_send) const {
    const auto found = posted_[rank].find({peer, is_send});
    return found == posted_[rank].end() ? 0 : found->second;
  }

  void PostHead(int rank) {
    if (head_[rank] >= segments_[rank].size()) return;
    for (const CommOp& op : segments_[rank][head_[rank]].group) {
      ++Posted(rank, op.peer, op.is_send);
      Wake(op.peer);
    }
    Wake(rank);
  }

  void Wake(int rank) {
    if (queued_[rank]) return;
    queued_[rank] = true;
    work_.push_back(rank);
  }

  // Our k-th send to `peer` needs the peer's k-th receive from us posted, and vice versa.
  bool Matched(int rank, const CommOp& op) const {
    return PostedOr0(op.peer, rank, !op.is_send) > op.ordinal;
  }

  // The first op of the rank's head group whose counterpart is not posted yet.
  const CommOp* Blocking(int rank) const {
    for (const CommOp& op : segments_[rank][head_[rank]].group) {
      if (!Matched(rank, op)) return &op;
    }
    return nullptr;
  }

  bool CanComplete(int rank) const { return Blocking(rank) == nullptr; }

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
  std::vector<std::vector<Segment>> segments_;
  std::vector<size_t> head_;
  std::vector<std::map<std::pair<int, bool>, size_t>> posted_;  // rank -> (peer, send?) -> count
  std::vector<bool> queued_;
  std::deque<int> work_;
};

}  // namespace

Status DryRun(const Plan& plan) { return DryRunner(plan).Run(); }

}  // namespace pipeplan
