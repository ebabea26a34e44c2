// ZB-H1 and ZB-H2 (Zero Bubble, hand-crafted): the backward is split into I (input grad)
// and W (weight grad); W's are deferred to fill the bubbles. c = 1 holds P activations
// like 1F1B, c = 2 holds 2P-1 and removes the remaining bubble when W is large enough.
#include <algorithm>
#include <deque>
#include <string>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

StatusOr<ComputeOrder> GenerateZbHandcrafted(const PlanRequest& request, const StageMap& stages,
                                             int c) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    std::deque<int> pending_weights;
    const int warmup = std::min(c * (ranks - 1 - rank), microbatches);
    for (int mb = 0; mb < warmup; ++mb) builder.Forward(0, mb);
    for (int i = 0; i < microbatches; ++i) {
      if (warmup + i < microbatches) builder.Forward(0, warmup + i);
      builder.Input(0, i);
      pending_weights.push_back(i);
      if (warmup + i >= c * (ranks - 1)) {
        builder.Weight(0, pending_weights.front());
        pending_weights.pop_front();
      }
    }
    for (const int mb : pending_weights) builder.Weight(0, mb);
    order.push_back(builder.Take());
  }
  return order;
}

}  // namespace

StatusOr<ComputeOrder> GenerateZbH1(const PlanRequest& request, const StageMap& stages) {
  return GenerateZbHandcrafted(request, stages, 1);
}

StatusOr<ComputeOrder> GenerateZbH2(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  if (microbatches < 2 * ranks) {
    return InvalidArgument("zb-h2 needs at least 2P microbatches: P=" + std::to_string(ranks) +
                           " needs M >= " + std::to_string(2 * ranks) +
                           ", got M=" + std::to_string(microbatches));
  }
  return GenerateZbHandcrafted(request, stages, 2);
}

}  // namespace pipeplan::strategies
