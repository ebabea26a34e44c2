// Fuzz target: layer cost files ('pipeplan partition --layers', what pipeplan.torch.measure_layers
// writes), as binary, text and JSON. Whatever parses is valid (ParseLayerCosts validates) and
// must round-trip; a file of a few layers then goes through the partition search on a small
// pipeline (1F1B and zbv at P = 2, with and without a byte limit), which must answer with a
// split or a clear error, never crash. `enumerate_up_to` stays small: the search, not
// enumeration, is what is fuzzed.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/layer_costs.h"
#include "pipeplan/planner/partition.h"

namespace {

using namespace pipeplan;

constexpr size_t kMaxLayers = 12;

void Search(const LayerCosts& layers, const char* strategy, std::optional<double> limit) {
  PartitionRequest request;
  request.layers = layers;
  request.ranks = 2;
  request.microbatches = 4;
  request.strategy = strategy;
  if (limit.has_value()) request.memory_limits = {*limit};
  request.enumerate_up_to = 16;
  const StatusOr<PartitionResult> result = Partition(request);
  if (!result.ok()) return;
  // The pick holds every layer, in order, each stage at least one: starts from 0, strictly
  // increasing, within the layers.
  const LayerSplit& starts = result->best.split;
  PIPEPLAN_FUZZ_CHECK(!starts.empty() && starts.front() == 0);
  for (size_t k = 1; k < starts.size(); ++k) PIPEPLAN_FUZZ_CHECK(starts[k - 1] < starts[k]);
  PIPEPLAN_FUZZ_CHECK(starts.back() < static_cast<int>(layers.layers.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<LayerCosts> layers = ParseLayerCosts(fuzz::AsText(data, size), format);
    if (!layers.ok()) continue;
    PIPEPLAN_FUZZ_CHECK_OK(ValidateLayerCosts(*layers));
    fuzz::CheckRoundTrip<LayerCosts>(*layers, SerializeLayerCosts, ParseLayerCosts);
    if (layers->layers.size() > kMaxLayers) continue;
    Search(*layers, "1f1b", std::nullopt);
    Search(*layers, "zbv", std::nullopt);
    Search(*layers, "1f1b", 1e9);
  }
  return 0;
}
