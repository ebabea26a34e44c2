// 1F1B with F&B overlap cells (the steady state of MoE pipelines that hide all-to-all): one
// more warm-up forward than 1F1B needs twice over, then each (next F, next B) pair runs as one
// overlap cell, then the remaining backwards. The interleaved variant uses Megatron's table
// with G = P and warm-up + 1 (Megatron's EP all-to-all overlap order).
#include <algorithm>
#include <vector>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateOneFOneBOverlap(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    const StageId stage = stages.StagesOf(RankId(rank))[0];
    const int warmup = std::min(2 * (ranks - rank - 1) + 1, microbatches);
    for (int mb = 0; mb < warmup; ++mb) builder.Forward(0, mb);
    for (int i = 0; i < microbatches - warmup; ++i) {
      builder.Append(MakeOverlap(MakeCompute(ActionKind::kForward, stage, MicrobatchId(warmup + i)),
                                 MakeCompute(ActionKind::kBackward, stage, MicrobatchId(i))));
    }
    for (int mb = microbatches - warmup; mb < microbatches; ++mb) builder.Backward(0, mb);
    order.push_back(builder.Take());
  }
  return order;
}

StatusOr<ComputeOrder> GenerateInterleaved1F1BOverlap(const PlanRequest& request,
                                                      const StageMap& stages) {
  // Start from the interleaved 1F1B order with one more warm-up forward, then fuse pairs.
  const int ranks = stages.num_ranks();
  const int chunks = request.topology.stages_per_rank;
  const int microbatches = request.topology.microbatches;
  PlanRequest interleaved = request;
  interleaved.options.microbatch_group_size = ranks;
  PIPEPLAN_ASSIGN_OR_RETURN(ComputeOrder plain, GenerateInterleaved1F1B(interleaved, stages));
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    const int total = microbatches * chunks;
    const int plain_warmup = std::min(2 * (ranks - rank - 1) + (chunks - 1) * ranks, total);
    const int warmup = std::min(plain_warmup + 1, total);
    // Plain order: warm-up F's, then (F, B) pairs, then B's. Re-split it with the larger
    // warm-up: forwards and backwards keep their relative order.
    std::vector<Action> forwards, backwards;
    for (const Action& action : plain[rank]) {
      (action.kind == ActionKind::kForward ? forwards : backwards).push_back(action);
    }
    std::vector<Action> actions(forwards.begin(), forwards.begin() + warmup);
    for (int i = 0; i < total - warmup; ++i)
      actions.push_back(MakeOverlap(forwards[warmup + i], backwards[i]));
    actions.insert(actions.end(), backwards.begin() + (total - warmup), backwards.end());
    order.push_back(std::move(actions));
  }
  return order;
}

}  // namespace pipeplan::strategies
