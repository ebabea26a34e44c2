#include "pipeplan/formats/split_layout.h"

#include <string_view>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

int StageEnd(const LayerSplit& split, size_t k, size_t layers) {
  return static_cast<int>(k + 1 < split.size() ? static_cast<size_t>(split[k + 1]) : layers);
}

bool Holds(const std::string& name, std::string_view word) {
  return name.find(word) != std::string::npos;
}

bool IsHead(const std::string& name) {
  return Holds(name, "output") || Holds(name, "head") || Holds(name, "loss");
}

char LayoutLetter(const LayerCosts& layers, size_t i) {
  const std::string& name = layers.layers[i].name;
  if (Holds(name, "emb")) return 'E';
  if (IsHead(name)) return 'L';
  if (!Holds(name, "norm")) return 't';
  for (size_t j = i + 1; j < layers.layers.size(); ++j) {
    const std::string& later = layers.layers[j].name;
    if (!IsHead(later) && !Holds(later, "norm")) return 't';
  }
  return 'L';
}

std::string Letters(const LayerCosts& layers, const LayerSplit& split) {
  std::string out;
  for (size_t k = 0; k < split.size(); ++k) {
    if (k > 0) out += '|';
    int run = 0;
    bool loss = false;
    const auto flush = [&] {
      if (run > 0) out += run == 1 ? "t" : "t*" + std::to_string(run);
      run = 0;
    };
    for (int i = split[k]; i < StageEnd(split, k, layers.layers.size()); ++i) {
      const char letter = LayoutLetter(layers, static_cast<size_t>(i));
      if (letter == 't') {
        ++run;
        continue;
      }
      flush();
      if (letter == 'L' && loss) continue;
      loss = loss || letter == 'L';
      out += letter;
    }
    flush();
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> StageLayerNames(const LayerCosts& layers,
                                                      const LayerSplit& split) {
  std::vector<std::vector<std::string>> out;
  for (size_t k = 0; k < split.size(); ++k) {
    std::vector<std::string>& names = out.emplace_back();
    for (int i = split[k]; i < StageEnd(split, k, layers.layers.size()); ++i) {
      names.push_back(layers.layers[static_cast<size_t>(i)].name);
    }
  }
  return out;
}

std::optional<std::string> MegatronLayout(const LayerCosts& layers, const LayerSplit& split) {
  std::string layout = Letters(layers, split);
  const size_t embedding = layout.find('E');
  const size_t loss = layout.find('L');
  const size_t first_cut = layout.find('|');
  const size_t last_cut = layout.rfind('|');
  if (embedding != std::string::npos && first_cut != std::string::npos && embedding > first_cut) {
    return std::nullopt;
  }
  if (loss != std::string::npos && last_cut != std::string::npos && loss < last_cut) {
    return std::nullopt;
  }
  return layout;
}

std::string LayerNamesJson(const std::vector<std::vector<std::string>>& stages) {
  std::string out = "[";
  for (size_t k = 0; k < stages.size(); ++k) {
    out += k > 0 ? ",[" : "[";
    for (size_t i = 0; i < stages[k].size(); ++i) {
      out += (i > 0 ? ",\"" : "\"") + JsonEscape(stages[k][i]) + "\"";
    }
    out += "]";
  }
  return out + "]";
}

std::string SplitForRuntimesJson(const LayerCosts& layers, const LayerSplit& split) {
  const std::optional<std::string> layout = MegatronLayout(layers, split);
  return "{\"module_fqns_per_model_part\":" + LayerNamesJson(StageLayerNames(layers, split)) +
         ",\"pipeline_model_parallel_layout\":" +
         (layout.has_value() ? "\"" + JsonEscape(*layout) + "\""
                             : std::string("null,\"layout_note\":\"Megatron keeps the embedding "
                                           "(E) in the first stage and the final norm, head and "
                                           "loss (L) together in the last; this split does "
                                           "not\"")) +
         "}\n";
}

}  // namespace pipeplan
