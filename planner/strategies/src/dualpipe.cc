// DeepSeek's DualPipe and DualPipeV: the same eight steps per rank. Forwards and backwards of
// the two chunks run as F&B overlap cells in the main step; "zb" backwards run I now and
// queue their W (first in, first out), drained by the W steps.
//   DualPipeV: V placement, n = P, the rank index r, M microbatches per chunk; the last rank
//              issues its first F0&B1 cell as plain F0 then B1.
//   DualPipe:  dual placement (two model copies), n = P/2, r -> min(r, P-1-r), M/2 per copy;
//              ranks in the second half swap their chunks; the two middle ranks take the
//              plain first cell.
#include <algorithm>
#include <deque>
#include <string>
#include <utility>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

struct DualPipeShape {
  int half_ranks;         // n
  int half_rank;          // r (V) or min(r, P-1-r) (dual)
  int per_chunk;          // microbatches each chunk runs
  bool swap_chunks;       // second-half ranks of DualPipe
  bool plain_first_cell;  // run the first F0&B1 as F0 then B1
};

class DualPipeRank {
 public:
  DualPipeRank(const StageMap& stages, RankId rank, bool swap_chunks)
      : stages_(stages), rank_(rank), swap_(swap_chunks), builder_(stages, rank) {}

  void Forward(int chunk) { builder_.Forward(Local(chunk), forward_[chunk]++); }
  void Backward(int chunk, bool zero_bubble) {
    const int mb = backward_[chunk]++;
    if (!zero_bubble) {
      builder_.Backward(Local(chunk), mb);
      return;
    }
    builder_.Input(Local(chunk), mb);
    pending_weights_.emplace_back(chunk, mb);
  }
  void Weight() {
    const auto [chunk, mb] = pending_weights_.front();
    pending_weights_.pop_front();
    builder_.Weight(Local(chunk), mb);
  }
  // One cell: F of `forward_chunk` and a full B of `backward_chunk` at the same time.
  void Overlap(int forward_chunk, int backward_chunk) {
    const Action f = MakeCompute(ActionKind::kForward, Stage(forward_chunk),
                                 MicrobatchId(forward_[forward_chunk]++));
    const Action b = MakeCompute(ActionKind::kBackward, Stage(backward_chunk),
                                 MicrobatchId(backward_[backward_chunk]++));
    builder_.Append(MakeOverlap(f, b));
  }
  std::vector<Action> Take() { return builder_.Take(); }

 private:
  int Local(int chunk) const { return swap_ ? 1 - chunk : chunk; }
  StageId Stage(int chunk) const { return stages_.StagesOf(rank_)[Local(chunk)]; }

  const StageMap& stages_;
  RankId rank_;
  bool swap_;
  RankOrderBuilder builder_;
  int forward_[2] = {0, 0};
  int backward_[2] = {0, 0};
  std::deque<std::pair<int, int>> pending_weights_;  // (chunk, microbatch) of queued W's
};

std::vector<Action> EightSteps(const StageMap& stages, RankId rank, const DualPipeShape& s) {
  DualPipeRank out(stages, rank, s.swap_chunks);
  const int n = s.half_ranks;
  const int r = s.half_rank;
  for (int i = 0; i < 2 * (n - r - 1); ++i) out.Forward(0);  // 1: nF0
  for (int i = 0; i < r + 1; ++i) {                          // 2: nF0F1
    out.Forward(0);
    out.Forward(1);
  }
  for (int i = 0; i < n - r - 1; ++i) {  // 3: nB1W1F1, zero bubble
    out.Backward(1, true);
    out.Weight();
    out.Forward(1);
  }
  for (int i = 0; i < s.per_chunk - 2 * n + r + 1; ++i) {  // 4: main step, nF0B1F1B0
    if (i == 0 && s.plain_first_cell) {
      out.Forward(0);
      out.Backward(1, false);
    } else {
      out.Overlap(0, 1);
    }
    out.Overlap(1, 0);
  }
  for (int i = 0; i < n - r - 1; ++i) {  // 5: nB1F1B0
    out.Backward(1, false);
    out.Overlap(1, 0);
  }
  const int step6 = r + 1;  // 6: nB1B0, the second half zero bubble
  bool zero_bubble = false;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && r % 2 == 1) zero_bubble = true;
    out.Backward(1, zero_bubble);
    if (i == step6 / 2 && r % 2 == 0) zero_bubble = true;
    out.Backward(0, zero_bubble);
  }
  for (int i = 0; i < n - r - 1; ++i) {  // 7: nWB0, zero bubble
    out.Weight();
    out.Backward(0, true);
  }
  for (int i = 0; i < r + 1; ++i) out.Weight();  // 8: nW
  return out.Take();
}

}  // namespace

StatusOr<ComputeOrder> GenerateDualPipeV(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  if (microbatches < 2 * ranks) {
    return InvalidArgument("dualpipe-v needs at least 2P microbatches: P=" + std::to_string(ranks) +
                           " needs M >= " + std::to_string(2 * ranks) +
                           ", got M=" + std::to_string(microbatches));
  }
  ComputeOrder order;
  for (int r = 0; r < ranks; ++r) {
    const DualPipeShape shape{ranks, r, microbatches, false, r == ranks - 1};
    order.push_back(EightSteps(stages, RankId(r), shape));
  }
  return order;
}

StatusOr<ComputeOrder> GenerateDualPipe(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int microbatches = request.topology.microbatches;
  if (ranks % 2 != 0) {
    return InvalidArgument("dualpipe needs an even number of ranks, got P=" +
                           std::to_string(ranks));
  }
  if (microbatches < 2 * ranks) {
    return InvalidArgument(
        "dualpipe needs at least 2P microbatches (P per direction): P=" + std::to_string(ranks) +
        " needs M >= " + std::to_string(2 * ranks) + ", got M=" + std::to_string(microbatches));
  }
  const int half = ranks / 2;
  ComputeOrder order;
  for (int r = 0; r < ranks; ++r) {
    const bool middle = r == half - 1 || r == half;
    const DualPipeShape shape{half, std::min(r, ranks - 1 - r), microbatches / 2, r >= half,
                              middle};
    order.push_back(EightSteps(stages, RankId(r), shape));
  }
  return order;
}

}  // namespace pipeplan::strategies
