#include "pipeplan/model/topology.h"

#include <cstdint>
#include <string>

namespace pipeplan {
namespace {

// Far above any real job. Their product is capped separately (below): the three at once
// would be 2^34 (stage, microbatch) pairs.
constexpr int kMaxRanks = 4096;
constexpr int kMaxStagesPerRank = 64;
constexpr int kMaxMicrobatches = 1 << 16;
// A plan has up to 3 compute actions per (stage, microbatch): F, I and W (F and B when B is
// not split). Planning and simulating hold 83-101 bytes per action at scale, comm included
// (bench/scale_bench.cc; docs/reliability.md, "Scale"), which is ~250 bytes per compute
// action: 100 M compute actions need ~25 GB and minutes of planning, about the most a large
// workstation serves, and 8x the P=256, V=4, M=4096 scale case (12.6 M). A larger request
// would run out of memory after minutes of allocating; it is refused at once instead.
constexpr int64_t kMaxComputeActions = 100'000'000;

// Rank of local chunk `chunk` of `rank` under zig-zag placement with `ranks` ranks.
int VShapeStage(int rank, int chunk, int ranks) {
  const int pass_start = chunk * ranks;
  return (chunk % 2 == 0) ? pass_start + rank : pass_start + (ranks - 1 - rank);
}

}  // namespace

std::string_view PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kLoop:
      return "loop";
    case Placement::kVShape:
      return "v";
    case Placement::kDual:
      return "dual";
  }
  return "?";
}

StatusOr<Placement> ParsePlacement(std::string_view name) {
  if (name == "loop") return Placement::kLoop;
  if (name == "v") return Placement::kVShape;
  if (name == "dual") return Placement::kDual;
  return InvalidArgument("unknown placement '" + std::string(name) +
                         "' (expected loop, v or dual)");
}

Status ValidateChains(int chains, size_t entries, std::string_view field) {
  if (chains < 0 || chains > 2) {
    return InvalidArgument(std::string(field) + ": must be 0 or 1 (one chain) or 2 (two model " +
                           "copies, a dual placement's stages), got " + std::to_string(chains));
  }
  if (chains == 2 && entries > 1 && entries % 2 != 0) {
    return InvalidArgument(std::string(field) + ": 2 copies of the model need an even number of " +
                           "stage entries, got " + std::to_string(entries));
  }
  return Status::Ok();
}

Status ValidateTopology(const Topology& t) {
  if (t.ranks < 1 || t.ranks > kMaxRanks) {
    return InvalidArgument("ranks must be in 1.." + std::to_string(kMaxRanks) + ", got " +
                           std::to_string(t.ranks));
  }
  if (t.stages_per_rank < 1 || t.stages_per_rank > kMaxStagesPerRank) {
    return InvalidArgument("stages per rank must be in 1.." + std::to_string(kMaxStagesPerRank) +
                           ", got " + std::to_string(t.stages_per_rank));
  }
  if (t.microbatches < 1 || t.microbatches > kMaxMicrobatches) {
    return InvalidArgument("microbatches must be in 1.." + std::to_string(kMaxMicrobatches) +
                           ", got " + std::to_string(t.microbatches));
  }
  const int64_t pairs = int64_t{t.ranks} * t.stages_per_rank * t.microbatches;
  if (3 * pairs > kMaxComputeActions) {
    return InvalidArgument("P x V x M = " + std::to_string(t.ranks) + " x " +
                           std::to_string(t.stages_per_rank) + " x " +
                           std::to_string(t.microbatches) + " = " + std::to_string(pairs) +
                           " (stage, microbatch) pairs, up to " + std::to_string(3 * pairs) +
                           " compute actions (F, I and W each), above the cap of " +
                           std::to_string(kMaxComputeActions) + " compute actions");
  }
  if (t.placement == Placement::kDual && t.stages_per_rank != 2) {
    return InvalidArgument("dual placement needs 2 stages per rank, got " +
                           std::to_string(t.stages_per_rank));
  }
  if (t.placement == Placement::kDual && t.microbatches % 2 != 0) {
    return InvalidArgument(
        "dual placement splits the microbatches between two model copies, so M "
        "must be even, got " +
        std::to_string(t.microbatches));
  }
  return Status::Ok();
}

StageMap::StageMap(const Topology& topology)
    : dual_(topology.placement == Placement::kDual),
      microbatches_per_chain_(dual_ ? topology.microbatches / 2 : topology.microbatches) {
  const int ranks = topology.ranks;
  const int chunks = topology.stages_per_rank;
  rank_of_.resize(static_cast<size_t>(ranks) * chunks);
  chunk_of_.resize(rank_of_.size());
  stages_of_.resize(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const bool zig_zag = topology.placement == Placement::kVShape || dual_;
      const int stage = zig_zag ? VShapeStage(rank, chunk, ranks) : chunk * ranks + rank;
      rank_of_[stage] = RankId(rank);
      chunk_of_[stage] = chunk;
      stages_of_[rank].push_back(StageId(stage));
    }
  }
}

}  // namespace pipeplan
