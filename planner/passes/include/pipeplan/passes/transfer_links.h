// The transfers of a plan grouped by link (ordered pair of ranks), each link in program order:
// the k-th send on a link pairs with the k-th receive on it (NCCL matches by order). Built in
// two passes into flat arrays; post-validation, clock alignment and profiles pair transfers with
// it.
#pragma once

#include <span>
#include <vector>

#include "pipeplan/model/plan.h"

namespace pipeplan {

// One comm action: its rank, its index in the rank's program, and its ordinal among the
// rank's comm actions.
struct TransferRef {
  int rank = 0;
  int index = 0;
  int ordinal = 0;
};

class TransferLinks {
 public:
  // The sends (or receives) of one rank to (or from) one peer.
  struct Link {
    int peer = 0;
    int count = 0;
    int base = 0;  // first ref in the flat array
  };

  // Comm actions whose peer is not a rank of the plan are left out.
  explicit TransferLinks(const std::vector<RankProgram>& programs);

  // Links of `rank`, in the order of their first transfer in its program.
  std::span<const Link> SendLinks(int rank) const { return Links(sends_, rank); }
  std::span<const Link> ReceiveLinks(int rank) const { return Links(receives_, rank); }
  // The link from `rank` to `peer` (sends) or into `rank` from `peer` (receives); null if none.
  const Link* FindSendLink(int rank, int peer) const { return Find(sends_, rank, peer); }
  const Link* FindReceiveLink(int rank, int peer) const { return Find(receives_, rank, peer); }
  // Transfers on a link, in program order.
  std::span<const TransferRef> Refs(const Link& link) const {
    return {refs_.data() + link.base, static_cast<size_t>(link.count)};
  }

 private:
  struct Side {
    std::vector<Link> links;         // all ranks' links, rank by rank
    std::vector<int> offsets = {0};  // rank r's links: [offsets[r], offsets[r + 1])
  };

  static std::span<const Link> Links(const Side& side, int rank) {
    return {side.links.data() + side.offsets[rank],
            static_cast<size_t>(side.offsets[rank + 1] - side.offsets[rank])};
  }
  static const Link* Find(const Side& side, int rank, int peer) {
    for (const Link& link : Links(side, rank)) {
      if (link.peer == peer) return &link;
    }
    return nullptr;
  }

  Side sends_;
  Side receives_;
  std::vector<TransferRef> refs_;
};

}  // namespace pipeplan
