// Fuzz target: cost files cut again for another pipeline (what 'plan --costs' does when the
// file's per-stage entries were written for another P, V or placement: stage_recut.h). The
// input is a cost file (binary, text or JSON) followed by one byte that chooses the target
// topology: P in 1..8, V in 1..4, placement loop, V shape or dual. Per-stage entries of one
// chain or of two (chains: 2), memory in bytes and static_by_rank of another rank count are
// all cut. Where the file is valid for its own entries, the figures FitStageFigures returns
// must validate for the topology's stages and ranks and fit it as they are, and so must what
// RecutChainCosts and RecutChainMemory make of one chain; a small plan with the cut figures
// (1f1b, interleaved 1F1B, ZB-V or DualPipe by placement) builds or fails with a Status, and
// one that builds simulates.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/stage_recut.h"

namespace {

using namespace pipeplan;

// bits 0-2: P - 1; bits 3-4: V - 1; bits 5-6: placement (loop, V shape, dual, loop); bit 7:
// M = P + 1 rather than 2P (odd M, which dual placement refuses).
Topology TopologyOf(uint8_t selector) {
  static constexpr Placement kPlacements[] = {Placement::kLoop, Placement::kVShape,
                                              Placement::kDual, Placement::kLoop};
  Topology topology;
  topology.ranks = 1 + (selector & 7);
  topology.stages_per_rank = 1 + ((selector >> 3) & 3);
  topology.placement = kPlacements[(selector >> 5) & 3];
  topology.microbatches = (selector & 0x80) != 0 ? topology.ranks + 1 : 2 * topology.ranks;
  return topology;
}

// The strategy that plans a placement (one that does not take the topology's V refuses it).
const char* StrategyFor(const Topology& topology) {
  switch (topology.placement) {
    case Placement::kLoop:
      return topology.stages_per_rank == 1 ? "1f1b" : "interleaved-1f1b";
    case Placement::kVShape:
      return "zbv";
    case Placement::kDual:
      return "dualpipe";
  }
  return "1f1b";
}

// The stages a figures' entries describe, as FitStageFigures counts them.
int GivenStages(const CostModel& costs) {
  if (costs.stages.size() > 1) return static_cast<int>(costs.stages.size());
  if (costs.boundaries.size() > 1) return static_cast<int>(costs.boundaries.size()) + 1;
  return 1;
}

int EntriesOf(const MemoryModel& memory) {
  return std::max(1, static_cast<int>(memory.stages.size()));
}

// Figures valid for their own entries: what FitStageFigures promises to cut into valid ones.
bool ValidAsGiven(const CostModel& costs, const MemoryModel& memory) {
  return ValidateCostModel(costs, GivenStages(costs)).ok() &&
         ValidateMemoryModel(memory, EntriesOf(memory)).ok();
}

void CheckValidFor(const CostModel& costs, const MemoryModel& memory, const Topology& topology) {
  PIPEPLAN_FUZZ_CHECK_OK(ValidateCostModel(costs, topology.num_stages()));
  PIPEPLAN_FUZZ_CHECK_OK(ValidateMemoryModel(memory, topology.num_stages()));
  PIPEPLAN_FUZZ_CHECK_OK(ValidateStaticByRank(memory, topology.ranks));
}

// One chain's figures (the first chain), cut directly to the topology's stage count.
void RecutOneChain(const CostModel& costs, const MemoryModel& memory, const Topology& topology) {
  if (costs.chains > 1 || memory.chains > 1) return;
  const int stages = topology.num_stages();
  PIPEPLAN_FUZZ_CHECK_OK(ValidateCostModel(RecutChainCosts(costs, stages), stages));
  const int given_chunks = std::max(1, EntriesOf(memory) / topology.ranks);
  PIPEPLAN_FUZZ_CHECK_OK(
      ValidateMemoryModel(RecutChainMemory(memory, given_chunks, stages), stages));
}

void PlanWith(const StageFigures& figures, const Topology& topology) {
  if (!fuzz::SmallEnoughToPlan(topology)) return;
  PlanRequest request = fuzz::MakeRequest(StrategyFor(topology), topology.ranks,
                                          topology.microbatches, topology.stages_per_rank);
  request.topology.placement = topology.placement;
  request.costs = figures.costs;
  request.memory = figures.memory;
  const StatusOr<Plan> plan = BuildPlan(request);
  if (plan.ok()) PIPEPLAN_FUZZ_CHECK_OK(Simulate(*plan).status());
}

// As 'plan --costs FILE' takes a cost file: its memory model is the request's.
void FitAndPlan(CostModel costs, const Topology& topology) {
  const MemoryModel memory = costs.memory.value_or(MemoryModel{});
  costs.memory.reset();
  const StatusOr<StageFigures> fitted = FitStageFigures(costs, memory, topology);
  if (!fitted.ok() || !ValidAsGiven(costs, memory)) return;
  CheckValidFor(fitted->costs, fitted->memory, topology);
  PIPEPLAN_FUZZ_CHECK(FitsAsGiven(fitted->costs, fitted->memory, topology));
  RecutOneChain(costs, memory, topology);
  PlanWith(*fitted, topology);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Topology topology = TopologyOf(data[size - 1]);
  if (!ValidateTopology(topology).ok()) return 0;
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<CostModel> costs = ParseCostModel(fuzz::AsText(data, size - 1), format);
    if (costs.ok()) FitAndPlan(*costs, topology);
  }
  return 0;
}
