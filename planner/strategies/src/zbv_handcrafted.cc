// Hand-crafted ZB-V (PyTorch's ScheduleZBVZeroBubble) on the V placement: chunk 0 is stage r,
// chunk 1 stage 2P-1-r. Built for n = max(2P-1, M) microbatches, then every action of a
// microbatch >= M is dropped, as PyTorch does. Zero bubble when F = I = W.
#include <algorithm>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

class ZbvRank {
 public:
  ZbvRank(const StageMap& stages, RankId rank, int microbatches)
      : builder_(stages, rank), microbatches_(microbatches) {}

  void F(int chunk) { Emit(ActionKind::kForward, chunk, forward_[chunk]++); }
  void I(int chunk) { Emit(ActionKind::kBackwardInput, chunk, input_[chunk]++); }
  void W(int chunk) { Emit(ActionKind::kBackwardWeight, chunk, weight_[chunk]++); }
  int forwards(int chunk) const { return forward_[chunk]; }
  int inputs(int chunk) const { return input_[chunk]; }
  int weights(int chunk) const { return weight_[chunk]; }
  std::vector<Action> Take() { return builder_.Take(); }

 private:
  void Emit(ActionKind kind, int chunk, int mb) {
    if (mb < microbatches_) builder_.Add(kind, chunk, mb);
  }

  RankOrderBuilder builder_;
  int microbatches_;
  int forward_[2] = {0, 0};
  int input_[2] = {0, 0};
  int weight_[2] = {0, 0};
};

}  // namespace

StatusOr<ComputeOrder> GenerateZbvHandcrafted(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  const int n = std::max(2 * ranks - 1, microbatches);
  ComputeOrder order;
  for (int r = 0; r < ranks; ++r) {
    ZbvRank rank(stages, RankId(r), microbatches);
    for (int i = 0; i < 2 * (ranks - r) - 1; ++i) rank.F(0);
    for (int i = 0; i < r; ++i) {
      rank.F(1);
      rank.F(0);
    }
    for (int i = 0; i < ranks - r; ++i) {
      rank.F(1);
      rank.I(1);
      rank.W(1);
    }
    while (rank.forwards(1) < rank.forwards(0) || rank.forwards(0) < n) {
      if (rank.forwards(0) < n) rank.F(0);
      rank.I(0);
      rank.W(0);
      rank.F(1);
      rank.I(1);
      rank.W(1);
    }
    for (int i = 0; i < r; ++i) {
      rank.I(0);
      rank.I(1);
    }
    for (int i = 0; i < ranks - r; ++i) {
      rank.I(0);
      rank.W(0);
    }
    while (rank.weights(1) < rank.inputs(1)) rank.W(1);
    while (rank.weights(0) < rank.inputs(0)) rank.W(0);
    order.push_back(rank.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
