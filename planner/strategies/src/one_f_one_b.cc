// 1F1B (PipeDream-flush): P-1-r warm-up forwards, then one forward and one backward in turn,
// then the remaining backwards. Holds at most P-r activations on rank r.
#include <algorithm>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateOneFOneB(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    const int warmup = std::min(ranks - 1 - rank, microbatches);
    for (int mb = 0; mb < warmup; ++mb) builder.Forward(0, mb);
    for (int i = 0; i < microbatches - warmup; ++i) {
      builder.Forward(0, warmup + i);
      builder.Backward(0, i);
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) builder.Backward(0, mb);
    order.push_back(builder.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
