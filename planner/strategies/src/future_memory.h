// FutureMemory: the largest rise of a running sum over what is left of a sequence of memory
// changes, as one pass is taken out early at a time. The V-Half / V-Min greedy reordering
// (controllable_memory.cc) asks it, for every candidate forward, whether running it now keeps
// the rank within its block's peak.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

namespace pipeplan::strategies {

// Activation memory a rank will still add above what it holds now if it runs the rest of its
// block order as is: a segment tree over the order's memory changes that keeps the largest
// prefix sum, so running one pass early is an O(log n) update. Two things keep its walks
// short, since every greedy step makes one and perf showed the steps stalling in them (at
// P=256 each step lands on another rank, whose tree is cold):
//  * the lowest levels are not stored: a leaf covers a block of kBlock passes and is
//    recombined from their changes (one or two cache lines) when needed, an eighth of the
//    nodes (with a leaf per pass it was 256 MB over all ranks at P=256, M=4096);
//  * a node has four children, kept side by side in one cache line: half the levels of a
//    binary tree, one line read per level.
// Every node is recombined in the pairs of the binary tree over the same passes (a block
// pairwise, four children as (0, 1), (2, 3), then the two pairs), and empty nodes padding the
// tree change no sum, so every figure is bit-for-bit the same as a leaf-per-pass binary tree.
class FutureMemory {
 public:
  FutureMemory() = default;
  explicit FutureMemory(std::vector<double> changes) : changes_(std::move(changes)) {
    const size_t blocks = (changes_.size() + kBlock - 1) / kBlock;
    size_t leaves = 1;
    while (leaves < blocks) {
      first_leaf_ += leaves;  // the ids above the leaf level: 1 + 4 + 16 + ...
      leaves *= 4;
    }
    groups_.assign(first_leaf_, Group{});  // each node above the leaves has a group
    for (size_t block = 0; block < blocks; ++block) {
      SetNode(first_leaf_ + block, BlockNode(block, kKeepAll));
    }
    for (size_t id = first_leaf_; id-- > 0;) SetNode(id, CombineGroup(groups_[id]));
  }

  void Remove(size_t position) {
    changes_[position] = 0.0;  // Leaf(0) is the empty node
    size_t id = first_leaf_ + position / kBlock;
    SetNode(id, BlockNode(position / kBlock, kKeepAll));
    while (id != 0) {
      id = ParentOf(id);
      SetNode(id, CombineGroup(groups_[id]));
    }
  }

  // The largest rise (>= 0) over the remaining order with the pass at `position` left out:
  // the root recombined along the leaf's path, read-only (this runs for every candidate F).
  double RiseWithout(size_t position) const {
    Node combined = BlockNode(position / kBlock, position);
    for (size_t id = first_leaf_ + position / kBlock; id != 0; id = ParentOf(id)) {
      Group group = groups_[ParentOf(id)];
      group.child[(id - 1) % 4] = combined;
      combined = CombineGroup(group);
    }
    return combined.rise;
  }

 private:
  static constexpr size_t kBlock = 8;  // a power of two: blocks are subtrees of the full tree
  static constexpr size_t kKeepAll = ~size_t{0};

  // A range of the order: its total change and its largest prefix sum (empty prefix
  // included).
  struct Node {
    double sum = 0.0;
    double rise = 0.0;
  };
  // The four children of one node: one cache line.
  struct alignas(64) Group {
    std::array<Node, 4> child;
  };

  // Node ids as in a 4-ary heap: the root is 0, the children of `id` are 4 id + 1 .. 4 id + 4
  // and live in groups_[id]; the root's value is kept apart.
  static size_t ParentOf(size_t id) { return (id - 1) / 4; }
  Node& NodeAt(size_t id) { return groups_[ParentOf(id)].child[(id - 1) % 4]; }
  void SetNode(size_t id, const Node& node) {
    if (id == 0) {
      root_ = node;
    } else {
      NodeAt(id) = node;
    }
  }

  static Node Leaf(double change) { return {change, std::max(0.0, change)}; }
  static Node Combine(const Node& left, const Node& right) {
    return {left.sum + right.sum, std::max(left.rise, left.sum + right.rise)};
  }
  static Node CombineGroup(const Group& group) {
    return Combine(Combine(group.child[0], group.child[1]),
                   Combine(group.child[2], group.child[3]));
  }

  // The block's subtree, with the pass at `skip` (if in the block) left out; positions past
  // the order are empty, as in the full tree.
  Node BlockNode(size_t block, size_t skip) const {
    std::array<Node, kBlock> level;
    const size_t begin = block * kBlock;
    for (size_t i = 0; i < kBlock; ++i) {
      const size_t position = begin + i;
      level[i] = position < changes_.size() && position != skip ? Leaf(changes_[position]) : Node{};
    }
    for (size_t width = kBlock / 2; width >= 1; width /= 2) {
      for (size_t i = 0; i < width; ++i) level[i] = Combine(level[2 * i], level[2 * i + 1]);
    }
    return level[0];
  }

  std::vector<double> changes_;  // per position; 0 once the pass ran
  size_t first_leaf_ = 0;        // the id of block 0's leaf
  std::vector<Group> groups_;
  Node root_;
};

}  // namespace pipeplan::strategies
