// Looped BFS (breadth first): all microbatches through one local stage before the next;
// backwards in reverse stage and microbatch order.
#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateLoopedBfs(const PlanRequest& request, const StageMap& stages) {
  const int chunks = request.topology.stages_per_rank;
  const int microbatches = request.topology.microbatches;
  ComputeOrder order;
  for (int rank = 0; rank < stages.num_ranks(); ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    for (int chunk = 0; chunk < chunks; ++chunk) {
      for (int mb = 0; mb < microbatches; ++mb) builder.Forward(chunk, mb);
    }
    for (int chunk = chunks - 1; chunk >= 0; --chunk) {
      for (int mb = microbatches - 1; mb >= 0; --mb) builder.Backward(chunk, mb);
    }
    order.push_back(builder.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
