// Topology: how many ranks, stages and microbatches, and which rank owns which stage.
#pragma once

#include <string_view>
#include <vector>

#include "pipeplan/planner/ids.h"
#include "pipeplan/planner/status.h"

namespace pipeplan {

enum class Placement : uint8_t {
  kLoop,    // stage s on rank s % P (Megatron interleaving)
  kVShape,  // zig-zag: rank index rises on even passes, falls on odd ones
  kDual,    // DualPipe: rank r holds stage r of copy A and stage P-1-r of copy B
};

std::string_view PlacementName(Placement placement);
StatusOr<Placement> ParsePlacement(std::string_view name);

struct Topology {
  int ranks = 1;             // P
  int stages_per_rank = 1;   // V
  int microbatches = 1;      // M
  Placement placement = Placement::kLoop;

  int num_stages() const { return ranks * stages_per_rank; }
  bool operator==(const Topology&) const = default;
};

// Checks ranges (P, V, M >= 1 and bounded) and placement constraints.
Status ValidateTopology(const Topology& topology);

// Stage <-> rank mapping for a validated topology.
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
  bool IsFirst(StageId stage) const { return stage.value == 0; }
  bool IsLast(StageId stage) const { return stage.value == num_stages() - 1; }

 private:
  std::vector<RankId> rank_of_;
  std::vector<int> chunk_of_;
  std::vector<std::vector<StageId>> stages_of_;
};

}  // namespace pipeplan
