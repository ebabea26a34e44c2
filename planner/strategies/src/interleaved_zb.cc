// Interleaved zero bubble (PyTorch's ScheduleInterleavedZeroBubble): the interleaved 1F1B
// table with mpr = M / max(1, M / P) microbatches per round, I instead of B, and from
// steady step r on each I followed by the W of the oldest pending backward.
#include <algorithm>
#include <deque>
#include <string>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {

StatusOr<ComputeOrder> GenerateInterleavedZb(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int chunks = request.topology.stages_per_rank;
  const int microbatches = request.topology.microbatches;
  const int rounds = std::max(1, microbatches / ranks);
  if (microbatches % rounds != 0) {
    return InvalidArgument("interleaved-zb: M=" + std::to_string(microbatches) +
                           " must be a multiple of " + std::to_string(rounds) +
                           " (max(1, M / P) rounds), as in PyTorch");
  }
  const int per_round = microbatches / rounds;
  const int total = microbatches * chunks;
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    RankOrderBuilder builder(stages, RankId(rank));
    const int warmup = std::min((chunks - 1) * per_round + (ranks - 1 - rank), total);
    std::vector<int> next_forward(chunks, 0), next_input(chunks, 0), next_weight(chunks, 0);
    std::deque<int> pending_weights;  // chunks of backwards whose W is still due
    auto forward = [&](int step) {
      const int chunk = (step / per_round) % chunks;
      builder.Forward(chunk, next_forward[chunk]++);
    };
    auto input = [&](int step) {
      const int chunk = chunks - 1 - ((step - warmup) / per_round) % chunks;
      builder.Input(chunk, next_input[chunk]++);
      pending_weights.push_back(chunk);
    };
    auto weight = [&]() {
      const int chunk = pending_weights.front();
      pending_weights.pop_front();
      builder.Weight(chunk, next_weight[chunk]++);
    };
    for (int step = 0; step < total + warmup; ++step) {
      if (step < warmup) {
        forward(step);
        continue;
      }
      if (step < total) forward(step);
      input(step);
      if (step - warmup >= rank) weight();
    }
    while (!pending_weights.empty()) weight();
    order.push_back(builder.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
