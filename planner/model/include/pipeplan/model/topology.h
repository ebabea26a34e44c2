// Topology: how many ranks, stages and microbatches, and which rank owns which stage.
#pragma once

#include <string_view>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

enum class Placement : uint8_t {
  kLoop,    // stage s on rank s % P (Megatron interleaving)
  kVShape,  // zig-zag: rank index rises on even passes, falls on odd ones
  kDual,    // DualPipe: two model copies. Copy A is stages 0..P-1 (stage s on rank s), copy B
            // is stages P..2P-1 run the other way (stage P+j on rank P-1-j); each copy is a
            // chain of its own and takes half of the microbatches.
};

std::string_view PlacementName(Placement placement);
StatusOr<Placement> ParsePlacement(std::string_view name);

struct Topology {
  int ranks = 1;            // P
  int stages_per_rank = 1;  // V
  int microbatches = 1;     // M
  Placement placement = Placement::kLoop;

  int num_stages() const { return ranks * stages_per_rank; }
  bool operator==(const Topology&) const = default;
};

// How many stages a rank's share of one model copy is cut into: V, except under dual
// placement, where each of a rank's two stages is a whole share of its own copy. Default
// per-stage costs and activations are a share divided by this.
inline int ChunksPerShare(const Topology& topology) {
  return topology.placement == Placement::kDual ? 1 : topology.stages_per_rank;
}

// The chains (model copies) a topology's stages form: 2 under dual placement, else 1. Per-stage
// figures say theirs (CostModel::chains) so that a file of one placement serves another.
inline int ChainsOf(const Topology& topology) {
  return topology.placement == Placement::kDual ? 2 : 1;
}

// Checks a figures' `chains` field (0 or 1: one chain; 2: two copies of the model one after
// another) against its `entries` per-stage entries: two copies need an even number of them,
// or one (uniform). The error names `field`.
Status ValidateChains(int chains, size_t entries, std::string_view field);

// Checks ranges (P, V, M >= 1 and bounded, 3 x P x V x M compute actions at most 100 M) and
// placement constraints.
Status ValidateTopology(const Topology& topology);

// Stage <-> rank mapping for a validated topology, and the chains data flows along:
// activations go from stage s to s + 1 and gradients back, within one chain.
class StageMap {
 public:
  explicit StageMap(const Topology& topology);

  int num_stages() const { return static_cast<int>(rank_of_.size()); }
  int num_ranks() const { return static_cast<int>(stages_of_.size()); }
  RankId RankOf(StageId stage) const { return rank_of_[stage.value]; }
  // Stages of a rank in local-chunk order (chunk 0 first).
  const std::vector<StageId>& StagesOf(RankId rank) const { return stages_of_[rank.value]; }
  // Local chunk index of a stage on its rank.
  int ChunkOf(StageId stage) const { return chunk_of_[stage.value]; }
  // First / last stage of its chain: no stage before / after it.
  bool IsFirst(StageId stage) const {
    return stage.value == 0 || (dual_ && stage.value == num_ranks());
  }
  bool IsLast(StageId stage) const {
    return stage.value == num_stages() - 1 || (dual_ && stage.value == num_ranks() - 1);
  }
  // Microbatches that pass through a stage: M, or M / 2 per copy under dual placement.
  int MicrobatchesOf(StageId /*stage*/) const { return microbatches_per_chain_; }
  // Model copies: 2 under dual placement, else 1.
  int chains() const { return dual_ ? 2 : 1; }
  // The model copy a stage belongs to: 1 for dual placement's copy B, else 0.
  int ChainOf(StageId stage) const { return dual_ && stage.value >= num_ranks() ? 1 : 0; }
  // Which of the model's stages a stage runs: itself, or under dual placement its place in
  // its copy (copy B's stage P + j runs the model's stage j, from the same weights).
  int DepthOf(StageId stage) const { return stage.value - ChainOf(stage) * num_ranks(); }
  // Which of the step's M microbatches a stage's microbatch `mb` is: copy B runs the second
  // half.
  int BatchMicrobatchOf(StageId stage, MicrobatchId mb) const {
    return ChainOf(stage) * microbatches_per_chain_ + mb.value;
  }

 private:
  std::vector<RankId> rank_of_;
  std::vector<int> chunk_of_;
  std::vector<std::vector<StageId>> stages_of_;
  bool dual_ = false;
  int microbatches_per_chain_ = 0;
};

}  // namespace pipeplan
