// GPipe: every forward, then every backward (all activations held at once).
#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateGpipe(const PlanRequest& request, const StageMap& stages) {
  const int microbatches = request.topology.microbatches;
  ComputeOrder order;
  for (int rank = 0; rank < stages.num_ranks(); ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    for (int mb = 0; mb < microbatches; ++mb) builder.Forward(0, mb);
    for (int mb = 0; mb < microbatches; ++mb) builder.Backward(0, mb);
    order.push_back(builder.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
