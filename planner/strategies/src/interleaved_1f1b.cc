// Interleaved 1F1B (Megatron virtual pipeline). Forwards walk a table that sends each group
// of G microbatches through every local chunk; backwards walk the same table with chunks
// reversed. Warm-up 2(P-r-1) + (V-1)G forwards, then 1F1B, then the cool-down backwards.
#include <algorithm>
#include <string>
#include <vector>

#include "order_builder.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

struct TableEntry {
  int microbatch;
  int chunk;
};

Status CheckGroupSize(int group, int ranks, int microbatches) {
  const std::string setting = "microbatch group size " + std::to_string(group) +
                              " with P=" + std::to_string(ranks) +
                              ", M=" + std::to_string(microbatches);
  if (group < ranks || group > microbatches) {
    return InvalidArgument("interleaved-1f1b: " + setting + " is invalid: need P <= G <= M");
  }
  const int remainder = microbatches % group;
  if (remainder != 0 && remainder < ranks) {
    return InvalidArgument("interleaved-1f1b: " + setting + " is invalid: the last group has " +
                           std::to_string(remainder) +
                           " microbatches; need M % G == 0 or M % G >= P");
  }
  return Status::Ok();
}

std::vector<TableEntry> ScheduleTable(int microbatches, int chunks, int group) {
  std::vector<TableEntry> table;
  table.reserve(static_cast<size_t>(microbatches) * chunks);
  for (int start = 0; start < microbatches; start += group) {
    const int end = std::min(start + group, microbatches);
    for (int chunk = 0; chunk < chunks; ++chunk) {
      for (int mb = start; mb < end; ++mb) table.push_back({mb, chunk});
    }
  }
  return table;
}

// Emits forward/backward entries; microbatch ids come from per-chunk counters.
class InterleavedRank {
 public:
  InterleavedRank(const StageMap& stages, RankId rank, const std::vector<TableEntry>& table,
                  int chunks)
      : builder_(stages, rank),
        table_(table),
        chunks_(chunks),
        next_forward_mb_(chunks, 0),
        next_backward_mb_(chunks, 0) {}

  void NextForward() {
    const int chunk = table_[forward_entry_++].chunk;
    builder_.Forward(chunk, next_forward_mb_[chunk]++);
  }
  void NextBackward() {
    const int chunk = chunks_ - 1 - table_[backward_entry_++].chunk;
    builder_.Backward(chunk, next_backward_mb_[chunk]++);
  }
  std::vector<Action> Take() { return builder_.Take(); }

 private:
  RankOrderBuilder builder_;
  const std::vector<TableEntry>& table_;
  int chunks_;
  size_t forward_entry_ = 0;
  size_t backward_entry_ = 0;
  std::vector<int> next_forward_mb_;
  std::vector<int> next_backward_mb_;
};

}  // namespace

StatusOr<ComputeOrder> GenerateInterleaved1F1B(const PlanRequest& request, const StageMap& stages) {
  const int ranks = stages.num_ranks();
  const int chunks = request.topology.stages_per_rank;
  const int microbatches = request.topology.microbatches;
  const int group =
      request.options.microbatch_group_size > 0 ? request.options.microbatch_group_size : ranks;
  PIPEPLAN_RETURN_IF_ERROR(CheckGroupSize(group, ranks, microbatches));

  const std::vector<TableEntry> table = ScheduleTable(microbatches, chunks, group);
  const int total = microbatches * chunks;
  ComputeOrder order;
  for (int rank = 0; rank < ranks; ++rank) {
    InterleavedRank emitter(stages, RankId(rank), table, chunks);
    const int warmup = std::min(2 * (ranks - rank - 1) + (chunks - 1) * group, total);
    for (int i = 0; i < warmup; ++i) emitter.NextForward();
    for (int i = 0; i < total - warmup; ++i) {
      emitter.NextForward();
      emitter.NextBackward();
    }
    for (int i = 0; i < warmup; ++i) emitter.NextBackward();
    order.push_back(emitter.Take());
  }
  return order;
}

}  // namespace pipeplan::strategies
