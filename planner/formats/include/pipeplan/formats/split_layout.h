// A split of a model's layers (layer_costs.h) as the runtimes that build stages from it read
// it: torchtitan's module_fqns_per_model_part (the layer names per stage, in stage order) and
// Megatron's --pipeline-model-parallel-layout string.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/layer_costs.h"

namespace pipeplan {

// The names of the layers each stage holds, in stage order (torchtitan's
// module_fqns_per_model_part).
std::vector<std::vector<std::string>> StageLayerNames(const LayerCosts& layers,
                                                      const LayerSplit& split);

// Megatron's layout: per stage ('|' between) its layers as letters, E for a layer whose name
// holds "emb", L for one whose name holds "output", "head" or "loss", or "norm" with only such
// layers after it (the final norm, which Megatron's L holds with the head), t otherwise; runs
// of t counted ("t*3"), one L per stage: "Et*2|t*3|t*2L". nullopt where Megatron cannot hold
// the split: E past the first stage, or L before the last.
std::optional<std::string> MegatronLayout(const LayerCosts& layers, const LayerSplit& split);

// [["a","b"],["c"]]: the names as a JSON array of arrays.
std::string LayerNamesJson(const std::vector<std::vector<std::string>>& stages);

// The file `partition --split` writes: {"module_fqns_per_model_part": ...,
// "pipeline_model_parallel_layout": "..." or null with a "layout_note"}, one line.
std::string SplitForRuntimesJson(const LayerCosts& layers, const LayerSplit& split);

}  // namespace pipeplan
