// Fuzz target: cost files ('plan --costs', what 'calibrate' writes), as binary, text and JSON.
// Whatever parses must round-trip; a cost model that is valid for some number of stages then
// drives the cost-aware greedy strategies (zb, zbv) on a small pipeline of that many stages.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/cost_model.h"

namespace {

using namespace pipeplan;

// The stage count the model's sizes describe: S entries, or S - 1 boundaries, or (uniform) 4.
int StagesOf(const CostModel& costs) {
  if (costs.stages.size() > 1) return static_cast<int>(costs.stages.size());
  if (costs.boundaries.size() > 1) return static_cast<int>(costs.boundaries.size()) + 1;
  return 4;
}

void PlanWith(const CostModel& costs, const char* strategy, int ranks, int stages_per_rank) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = 2 * ranks;
  request.costs = costs;
  fuzz::PlanAndSimulate(request);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<CostModel> costs = ParseCostModel(fuzz::AsText(data, size), format);
    if (!costs.ok()) continue;
    fuzz::CheckRoundTrip<CostModel>(*costs, SerializeCostModel, ParseCostModel);
    const int stages = StagesOf(*costs);
    if (stages > 16 || !ValidateCostModel(*costs, stages).ok()) continue;
    PlanWith(*costs, "zb", stages, 1);
    if (stages % 2 == 0) PlanWith(*costs, "zbv", stages / 2, 2);
  }
  return 0;
}
