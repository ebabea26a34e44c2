// Deadlock dry run under the strictest semantics a runtime may have: each maximal run of
// consecutive comm actions is one group (ncclGroupStart/End) that completes only when every
// transfer in it is matched by the peer's posted counterpart; compute never blocks (the
// validator has already checked that inputs are received before use), so a rank's program
// reduces to its comm groups. The k-th send on a link pairs with the k-th receive on it, so a
// send is matched once its receiver has posted more than k receives from it (and the other
// way round): per-link counters of posted transfers stand in for an explicit pairing.
// A blocked rank waits on one counter reaching one value and is woken only then, and it
// resumes at the transfer it waited for (matched stays matched): every transfer is posted
// once and looked at a bounded number of times.
#include <string>
#include <vector>

#include "pipeplan/checks/validator.h"
#include "pipeplan/model/plan_util.h"

namespace pipeplan {
namespace {

struct CommOp {
  int index = 0;  // in the rank's program
  int peer = 0;
  int link = -1;    // this rank's link with the peer in this direction (-1: peer not a rank)
  int ordinal = 0;  // k: this is the k-th transfer on its link
};

// One direction of traffic between this rank and a peer.
struct Link {
  int peer = 0;
  bool sends = false;
  int posted = 0;        // transfers on it in groups this rank has reached
  int counterpart = -1;  // the peer's link for the other end (global index), -1 if none
  int wake_at = 0;       // the peer waits until `posted` reaches this (0: nobody waits)
};

// One rank's comm actions, in program order, cut into groups.
struct RankGroups {
  std::vector<CommOp> ops;
  std::vector<int> group_start;  // group g covers ops[start[g], start[g + 1])
  int first_link = 0;            // its links: links_[first_link, end_link)
  int end_link = 0;

  int size() const { return static_cast<int>(group_start.size()) - 1; }
  const CommOp* begin(int g) const { return ops.data() + group_start[g]; }
  const CommOp* end(int g) const { return ops.data() + group_start[g + 1]; }
};

class DryRunner {
 public:
  explicit DryRunner(const Plan& plan) : plan_(plan) {
    const size_t ranks = plan.programs.size();
    groups_.resize(ranks);
    head_.assign(ranks, 0);
    scan_.assign(ranks, 0);
    for (size_t r = 0; r < ranks; ++r) BuildGroups(static_cast<int>(r));
    ConnectLinks();
    for (size_t r = 0; r < ranks; ++r) Post(static_cast<int>(r), 0);
  }

  Status Run() {
    work_.reserve(groups_.size());
    for (size_t r = 0; r < groups_.size(); ++r) work_.push_back(static_cast<int>(r));
    // work_ grows while it is walked, so it is indexed rather than iterated. A rank is in it
    // at most once at a time: it is woken only while it waits, and it waits on one counter.
    size_t next = 0;
    while (next < work_.size()) Advance(work_[next++]);
    for (size_t r = 0; r < groups_.size(); ++r) {
      if (head_[r] < groups_[r].size()) return Deadlock(static_cast<int>(r));
    }
    return Status::Ok();
  }

 private:
  void BuildGroups(int rank) {
    RankGroups& out = groups_[rank];
    const auto& actions = plan_.programs[rank].actions;
    const int ranks = static_cast<int>(plan_.programs.size());
    out.first_link = static_cast<int>(links_.size());
    out.ops.reserve(actions.size());
    out.group_start.reserve(actions.size() / 2 + 1);
    bool in_group = false;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      if (!IsComm(action.kind)) {
        in_group = false;
        continue;
      }
      if (!in_group) out.group_start.push_back(static_cast<int>(out.ops.size()));
      in_group = true;
      CommOp& op = out.ops.emplace_back();
      op.index = static_cast<int>(i);
      op.peer = action.peer.value;
      if (op.peer < 0 || op.peer >= ranks) continue;
      op.link = LinkOf(out, op.peer, IsSend(action.kind));
      op.ordinal = link_count_[op.link]++;
    }
    out.group_start.push_back(static_cast<int>(out.ops.size()));
    out.end_link = static_cast<int>(links_.size());
  }

  // This rank's link with `peer` in one direction; a rank has a handful, searched linearly.
  int LinkOf(const RankGroups& rank, int peer, bool sends) {
    for (int l = rank.first_link; l < static_cast<int>(links_.size()); ++l) {
      if (links_[l].peer == peer && links_[l].sends == sends) return l;
    }
    links_.push_back({peer, sends, 0, -1});
    link_count_.push_back(0);
    return static_cast<int>(links_.size()) - 1;
  }

  // Joins each link with the peer's link that carries the other end of its transfers.
  void ConnectLinks() {
    for (size_t r = 0; r < groups_.size(); ++r) {
      const RankGroups& rank = groups_[r];
      for (int l = rank.first_link; l < rank.end_link; ++l) {
        Link& link = links_[l];
        const RankGroups& peer = groups_[link.peer];
        for (int p = peer.first_link; p < peer.end_link; ++p) {
          if (links_[p].peer == static_cast<int>(r) && links_[p].sends != link.sends) {
            link.counterpart = p;
          }
        }
      }
    }
  }

  // Runs `rank` from where it stopped until a transfer of its head group is not matched
  // (then it waits on that counter) or its program ends.
  void Advance(int rank) {
    const RankGroups& groups = groups_[rank];
    while (head_[rank] < groups.size()) {
      const CommOp* end = groups.end(head_[rank]);
      for (const CommOp* op = groups.begin(head_[rank]) + scan_[rank]; op != end; ++op) {
        if (!Matched(*op)) {
          WaitFor(*op);
          return;
        }
        ++scan_[rank];
      }
      ++head_[rank];
      scan_[rank] = 0;
      Post(rank, head_[rank]);
    }
  }

  // The rank of `op` sleeps until the peer has posted the counterpart of its transfer; a
  // transfer with no counterpart link is never matched, and its rank never woken.
  void WaitFor(const CommOp& op) {
    if (op.link < 0 || links_[op.link].counterpart < 0) return;
    links_[links_[op.link].counterpart].wake_at = op.ordinal + 1;
  }

  // Group `g` of `rank` is reached: its transfers are posted, and a peer waiting for one of
  // them is woken.
  void Post(int rank, int g) {
    const RankGroups& groups = groups_[rank];
    if (g >= groups.size()) return;
    for (const CommOp* op = groups.begin(g); op != groups.end(g); ++op) {
      if (op->link < 0) continue;
      Link& link = links_[op->link];
      ++link.posted;
      if (link.wake_at != 0 && link.posted >= link.wake_at) {
        link.wake_at = 0;
        work_.push_back(link.peer);
      }
    }
  }

  // The k-th transfer on a link is matched once the peer has posted more than k transfers on
  // the other end (a group is posted as soon as the rank reaches it).
  bool Matched(const CommOp& op) const {
    if (op.link < 0) return false;
    const int counterpart = links_[op.link].counterpart;
    return counterpart >= 0 && links_[counterpart].posted > op.ordinal;
  }

  // The first op of the rank's head group whose counterpart is not posted yet.
  const CommOp* Blocking(int rank) const {
    const RankGroups& groups = groups_[rank];
    for (const CommOp* op = groups.begin(head_[rank]); op != groups.end(head_[rank]); ++op) {
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
    std::vector<bool> seen(groups_.size(), false);
    int rank = start;
    while (rank >= 0 && !seen[rank] && head_[rank] < groups_[rank].size()) {
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
  std::vector<RankGroups> groups_;
  std::vector<Link> links_;      // every rank's links, rank by rank
  std::vector<int> link_count_;  // per link: transfers seen while building
  std::vector<int> head_;        // per rank: its first group not completed
  std::vector<int> scan_;        // per rank: the ops of its head group matched so far
  std::vector<int> work_;        // FIFO of ranks to advance
};

}  // namespace

Status DryRun(const Plan& plan) { return DryRunner(plan).Run(); }

}  // namespace pipeplan
