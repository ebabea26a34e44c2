#include "pipeplan/simulation/clock_alignment.h"

#include <algorithm>
#include <cmath>

#include "pipeplan/passes/transfer_links.h"

namespace pipeplan {
namespace {

// d_receiver >= d_sender - slack, where slack = receive end - send start.
struct Constraint {
  int sender = 0;
  int receiver = 0;
  double slack = 0.0;
};

std::vector<Constraint> TransferConstraints(const Plan& plan,
                                            const std::vector<RankTimeline>& ranks) {
  std::vector<Constraint> constraints;
  const TransferLinks links(plan.programs);
  for (int sender = 0; sender < static_cast<int>(plan.programs.size()); ++sender) {
    for (const TransferLinks::Link& link : links.SendLinks(sender)) {
      const TransferLinks::Link* incoming = links.FindReceiveLink(link.peer, sender);
      if (incoming == nullptr) continue;
      const auto sends = links.Refs(link);
      const auto receives = links.Refs(*incoming);
      for (size_t k = 0; k < sends.size() && k < receives.size(); ++k) {
        const double sent = ranks[sends[k].rank].actions[sends[k].index].start;
        const double received = ranks[receives[k].rank].actions[receives[k].index].end;
        constraints.push_back({sender, link.peer, received - sent});
      }
    }
  }
  return constraints;
}

void Shift(RankTimeline& rank, double offset) {
  for (ActionTiming& timing : rank.actions) {
    timing.start += offset;
    timing.end += offset;
  }
  for (MemorySample& sample : rank.memory) sample.time += offset;
  rank.first_start += offset;
  rank.last_end += offset;
}

}  // namespace

std::vector<double> AlignRankClocks(const Plan& plan, std::vector<RankTimeline>& ranks) {
  const size_t count = ranks.size();
  std::vector<double> offsets(count, 0.0);
  if (count != plan.programs.size()) return offsets;
  for (size_t r = 0; r < count; ++r) {
    if (ranks[r].actions.size() != plan.programs[r].actions.size()) return offsets;
  }
  const std::vector<Constraint> constraints = TransferConstraints(plan, ranks);
  // A cycle of transfers that fit exactly sums to zero only up to rounding: smaller moves
  // than this are not moves.
  double largest = 1.0;
  for (const RankTimeline& rank : ranks) {
    for (const ActionTiming& timing : rank.actions) {
      largest = std::max({largest, std::abs(timing.start), std::abs(timing.end)});
    }
  }
  const double tolerance = 1e-9 * largest;
  // Longest-path relaxation from all zeros (Bellman-Ford): the least solution, reached
  // within `count` rounds unless the constraints contradict each other.
  bool changed = true;
  for (size_t round = 0; changed && round <= count; ++round) {
    changed = false;
    for (const Constraint& c : constraints) {
      const double needed = offsets[c.sender] - c.slack;
      if (needed > offsets[c.receiver] + tolerance) {
        offsets[c.receiver] = needed;
        changed = true;
      }
    }
  }
  if (changed) return std::vector<double>(count, 0.0);
  for (size_t r = 0; r < count; ++r) {
    if (offsets[r] > 0) Shift(ranks[r], offsets[r]);
  }
  return offsets;
}

}  // namespace pipeplan
