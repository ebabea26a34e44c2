// Deadlock dry run under the strictest semantics a runtime may have: each maximal run of
// consecutive comm actions is one group (ncclGroupStart/End) that completes only when every
// transfer in it is matched by the peer's posted counterpart; compute never blocks (the
// validator has already checked that inputs are received before use).
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
  size_t ordinal = 0;  // k-th transfer on this (from, to) link, in program order
};

// Counts per (peer, direction) for one rank. A rank talks to a handful of peers, so a short
// vector searched linearly beats any map.
class LinkCounters {
 public:
  size_t& At(int peer, bool is_send) {
    for (Entry& entry : entries_) {
      if (entry.peer == peer && entry.is_send == is_send) return entry.count;
    }
    entries_.push_back({peer, is_send, 0});
    return entries_.back().count;
  }
  size_t Get(int peer, bool is_send) const {
    for (const Entry& entry : entries_) {
      if (entry.peer == peer && entry.is_send == is_send) return entry.count;
    }
    return 0;
  }

 private:
  struct Entry {
    int peer;
    bool is_send;
    size_t count;
  };
  std::vector<Entry> entries_;
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
    posted_.resize(ranks);
    queued_.assign(ranks, 0);
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
      queued_[rank] = 0;
      while (head_[rank] < segments_[rank].size() && Blocking(rank) == nullptr) {
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
    std::vector<LinkCounters> ordinals(plan_.programs.size());  // per sender / receiver
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      RankSegments& out = segments_[r];
      bool in_group = false;
      const auto& actions = plan_.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& action = actions[i];
        if (!IsComm(action.kind)) {
          out.segment_start.push_back(out.ops.size());
          in_group = false;
          continue;
        }
        if (!in_group) out.segment_start.push_back(out.ops.size());
        in_group = true;
        const bool is_send = IsSendKind(action.kind);
        const size_t ordinal = ordinals[r].At(action.peer.value, is_send)++;
        out.ops.push_back({i, action.peer.value, is_send, ordinal});
      }
      out.segment_start.push_back(out.ops.size());
    }
  }

  void PostHead(int rank) {
    const RankSegments& segments = segments_[rank];
    if (head_[rank] >= segments.size()) return;
    for (const CommOp* op = segments.begin(head_[rank]); op != segments.end(head_[rank]); ++op) {
      ++posted_[rank].At(op->peer, op->is_send);
      Wake(op->peer);
    }
    Wake(rank);
  }

  void Wake(int rank) {
    if (queued_[rank]) return;
    queued_[rank] = 1;
    work_.push_back(rank);
  }

  // Our k-th send to `peer` needs the peer's k-th receive from us posted, and vice versa.
  bool Matched(int rank, const CommOp& op) const {
    return posted_[op.peer].Get(rank, !op.is_send) > op.ordinal;
  }

  // The first op of the rank's head group whose counterpart is not posted yet.
  const CommOp* Blocking(int rank) const {
    const RankSegments& segments = segments_[rank];
    for (const CommOp* op = segments.begin(head_[rank]); op != segments.end(head_[rank]); ++op) {
      if (!Matched(rank, *op)) return op;
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
  std::vector<LinkCounters> posted_;  // per rank: what it has posted, per (peer, direction)
  std::vector<uint8_t> queued_;
  std::deque<int> work_;
};

}  // namespace

Status DryRun(const Plan& plan) { return DryRunner(plan).Run(); }

}  // namespace pipeplan
