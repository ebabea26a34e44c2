#include "pipeplan/passes/transfer_links.h"

namespace pipeplan {
namespace {

// The position of `peer` in a rank's links (from `first`), appending a new link if needed.
int LinkOf(std::vector<TransferLinks::Link>& links, size_t first, int peer) {
  for (size_t i = first; i < links.size(); ++i) {
    if (links[i].peer == peer) return static_cast<int>(i);
  }
  links.push_back({peer, 0, 0});
  return static_cast<int>(links.size()) - 1;
}

}  // namespace

TransferLinks::TransferLinks(const std::vector<RankProgram>& programs) {
  const int ranks = static_cast<int>(programs.size());
  // Pass 1: count the transfers of every link and remember each one's link.
  std::vector<int> link_of;  // per counted transfer, in program order: its link (sends >= 0)
  size_t total = 0;
  for (const RankProgram& program : programs) total += program.actions.size();
  link_of.reserve(total);
  for (int r = 0; r < ranks; ++r) {
    const size_t first_send = sends_.links.size();
    const size_t first_receive = receives_.links.size();
    for (const Action& action : programs[r].actions) {
      if (!IsComm(action.kind)) continue;
      const int peer = action.peer.value;
      if (peer < 0 || peer >= ranks) continue;
      if (IsSend(action.kind)) {
        const int link = LinkOf(sends_.links, first_send, peer);
        ++sends_.links[link].count;
        link_of.push_back(link);
      } else {
        const int link = LinkOf(receives_.links, first_receive, peer);
        ++receives_.links[link].count;
        link_of.push_back(-1 - link);
      }
    }
    sends_.offsets.push_back(static_cast<int>(sends_.links.size()));
    receives_.offsets.push_back(static_cast<int>(receives_.links.size()));
  }
  // Pass 2: lay the links out in one array and fill them in program order.
  int base = 0;
  for (Link& link : sends_.links) {
    link.base = base;
    base += link.count;
  }
  for (Link& link : receives_.links) {
    link.base = base;
    base += link.count;
  }
  refs_.resize(static_cast<size_t>(base));
  std::vector<int> filled_send(sends_.links.size(), 0);
  std::vector<int> filled_receive(receives_.links.size(), 0);
  size_t next = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<Action>& actions = programs[r].actions;
    int ordinal = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsComm(actions[i].kind)) continue;
      const int peer = actions[i].peer.value;
      if (peer >= 0 && peer < ranks) {
        const int link = link_of[next++];
        const TransferRef ref{r, static_cast<int>(i), ordinal};
        if (link >= 0) {
          refs_[sends_.links[link].base + filled_send[link]++] = ref;
        } else {
          refs_[receives_.links[-1 - link].base + filled_receive[-1 - link]++] = ref;
        }
      }
      ++ordinal;
    }
  }
}

}  // namespace pipeplan
