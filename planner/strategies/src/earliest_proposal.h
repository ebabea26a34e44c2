// EarliestProposal: which rank's proposed next pass starts first, as proposals change one rank
// at a time (the V-Half / V-Min greedy reordering, controllable_memory.cc).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

namespace pipeplan::strategies {

// The rank whose proposal starts earliest (ties: the lower rank), kept in a tree of minima
// over the ranks: a proposal changes in O(log P) and nothing is allocated per greedy step.
class EarliestProposal {
 public:
  explicit EarliestProposal(size_t ranks) {
    while (leaves_ < ranks) leaves_ *= 2;
    nodes_.assign(2 * leaves_, kNone);
  }

  void Set(size_t rank, double start) { Update(rank, {start, rank}); }
  void Clear(size_t rank) { Update(rank, kNone); }
  std::optional<size_t> Earliest() const {
    if (nodes_[1].rank == kNoRank) return std::nullopt;
    return nodes_[1].rank;
  }

 private:
  static constexpr size_t kNoRank = ~size_t{0};
  // Starts are finite, so "no proposal" (an infinite start) loses to every proposal.
  struct Entry {
    double start;
    size_t rank;
    bool operator<(const Entry& other) const {
      return start < other.start || (start == other.start && rank < other.rank);
    }
    bool operator==(const Entry& other) const = default;
  };
  static constexpr Entry kNone = {std::numeric_limits<double>::infinity(), kNoRank};

  // Replays the leaf's path; stops where a node keeps its winner (its ancestors keep theirs).
  void Update(size_t rank, Entry entry) {
    size_t node = leaves_ + rank;
    nodes_[node] = entry;
    for (node /= 2; node >= 1; node /= 2) {
      const Entry& left = nodes_[2 * node];
      const Entry& right = nodes_[2 * node + 1];
      const Entry winner = right < left ? right : left;
      if (winner == nodes_[node]) return;
      nodes_[node] = winner;
    }
  }

  size_t leaves_ = 1;
  std::vector<Entry> nodes_;  // nodes_[1] is the root; leaf of rank r at leaves_ + r
};

}  // namespace pipeplan::strategies
