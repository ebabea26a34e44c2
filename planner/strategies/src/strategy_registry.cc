#include <string>

#include "pipeplan/strategies/strategy.h"
#include "strategies.h"

namespace pipeplan {
namespace {

// Room for the registered strategies: the catalogue never reallocates, so a Strategy pointer
// stays valid while strategies are registered.
constexpr size_t kCatalogueCapacity = 64;

std::vector<Strategy> BuiltInStrategies() {
  std::vector<Strategy> strategies = {
      {"gpipe", "all forwards, then all backwards", Placement::kLoop, 1, 1,
       strategies::GenerateGpipe},
      {"1f1b", "one forward, one backward (PipeDream-flush)", Placement::kLoop, 1, 1,
       strategies::GenerateOneFOneB},
      {"interleaved-1f1b", "Megatron virtual pipeline, V stages per rank", Placement::kLoop, 2, 0,
       strategies::GenerateInterleaved1F1B, nullptr, false, StrategySetting::kGroupSizes},
      {"looped-bfs", "breadth first over the local stages", Placement::kLoop, 1, 0,
       strategies::GenerateLoopedBfs},
      {"zb-h1", "zero bubble hand schedule, 1F1B memory", Placement::kLoop, 1, 1,
       strategies::GenerateZbH1, nullptr, true},
      {"zb-h2", "zero bubble hand schedule, 2P-1 activations", Placement::kLoop, 1, 1,
       strategies::GenerateZbH2, nullptr, true},
      {"zb", "zero bubble greedy under the memory limit (default 1F1B's peak)", Placement::kLoop, 1,
       1, strategies::GenerateZb, strategies::SmallestZbLimit, true, StrategySetting::kMemorySteps},
      {"zb-1p", "zero bubble greedy, 1F1B memory (P activations)", Placement::kLoop, 1, 1,
       strategies::GenerateZb1p, strategies::SmallestZbLimit, true},
      {"zb-2p", "zero bubble greedy, 2P activations", Placement::kLoop, 1, 1,
       strategies::GenerateZb2p, strategies::SmallestZbLimit, true},
      {"interleaved-zb", "PyTorch interleaved zero bubble", Placement::kLoop, 2, 0,
       strategies::GenerateInterleavedZb, nullptr, true},
      {"zbv-handcrafted", "PyTorch ZB-V hand schedule, V shape", Placement::kVShape, 2, 2,
       strategies::GenerateZbvHandcrafted, nullptr, true},
      {"zbv", "zero bubble V-shape greedy under the memory limit (default 1F1B's)",
       Placement::kVShape, 2, 2, strategies::GenerateZbv, strategies::SmallestZbvLimit, true},
      {"v-half", "controllable memory V-shape, half of 1F1B's activations", Placement::kVShape, 2,
       2, strategies::GenerateVHalf, nullptr, true},
      {"v-min", "controllable memory V-shape, a third of 1F1B's activations", Placement::kVShape, 2,
       2, strategies::GenerateVMin, nullptr, true},
      {"dualpipe", "DeepSeek DualPipe, two model copies, bidirectional", Placement::kDual, 2, 2,
       strategies::GenerateDualPipe},
      {"dualpipe-v", "DeepSeek DualPipeV, V shape with F&B overlap", Placement::kVShape, 2, 2,
       strategies::GenerateDualPipeV},
      {"1f1b-overlap", "1F1B with F&B overlap cells in the steady state", Placement::kLoop, 1, 1,
       strategies::GenerateOneFOneBOverlap},
      {"interleaved-1f1b-overlap", "Megatron interleaved order with F&B overlap cells",
       Placement::kLoop, 2, 0, strategies::GenerateInterleaved1F1BOverlap},
  };
  strategies.reserve(kCatalogueCapacity);
  return strategies;
}

std::vector<Strategy>& Catalogue() {
  static std::vector<Strategy> catalogue = BuiltInStrategies();
  return catalogue;
}

}  // namespace

const std::vector<Strategy>& AllStrategies() { return Catalogue(); }

Status RegisterStrategy(const Strategy& strategy) {
  const std::string name(strategy.name);
  if (name.empty() || name == "auto") {
    return InvalidArgument("a strategy needs a name other than '' and 'auto', got '" + name + "'");
  }
  if (FindStrategy(name) != nullptr) {
    return InvalidArgument("strategy '" + name + "' is registered already");
  }
  if (strategy.generate == nullptr) {
    return InvalidArgument("strategy '" + name + "' has no generator");
  }
  if (strategy.min_stages_per_rank < 1 ||
      (strategy.max_stages_per_rank > 0 &&
       strategy.max_stages_per_rank < strategy.min_stages_per_rank)) {
    return InvalidArgument("strategy '" + name + "' accepts no V: stages per rank " +
                           std::to_string(strategy.min_stages_per_rank) + ".." +
                           std::to_string(strategy.max_stages_per_rank));
  }
  std::vector<Strategy>& catalogue = Catalogue();
  if (catalogue.size() == catalogue.capacity()) {
    return FailedPrecondition("the strategy catalogue is full (" +
                              std::to_string(catalogue.capacity()) + " strategies)");
  }
  catalogue.push_back(strategy);
  return Status::Ok();
}

bool SupportsPostValidation(std::string_view strategy) {
  const Strategy* found = FindStrategy(strategy);
  return found != nullptr && found->post_validation;
}

namespace {

// "a, b, c": the catalogue's strategies that `has` the trait, in catalogue order.
std::string NamesOf(bool (*has)(const Strategy&)) {
  std::string names;
  for (const Strategy& strategy : AllStrategies()) {
    if (!has(strategy)) continue;
    names += names.empty() ? "" : ", ";
    names += strategy.name;
  }
  return names;
}

}  // namespace

std::string PostValidationStrategyNames() {
  return NamesOf([](const Strategy& s) { return s.post_validation; });
}

std::string OrderLimitStrategyNames() {
  return NamesOf([](const Strategy& s) { return s.smallest_limit != nullptr; });
}

std::string GroupSizeStrategyNames() {
  return NamesOf([](const Strategy& s) { return s.setting == StrategySetting::kGroupSizes; });
}

const Strategy* FindStrategy(std::string_view name) {
  for (const Strategy& strategy : AllStrategies()) {
    if (strategy.name == name) return &strategy;
  }
  return nullptr;
}

std::string StrategyNames() {
  std::string names;
  for (const Strategy& strategy : AllStrategies()) {
    names += strategy.name;
    names += ", ";
  }
  return names + "auto";
}

Status CheckApplicable(const Strategy& strategy, const Topology& topology) {
  return CheckStagesPerRank(strategy.name, strategy.min_stages_per_rank,
                            strategy.max_stages_per_rank, topology);
}

Status CheckStagesPerRank(std::string_view strategy, int min_stages_per_rank,
                          int max_stages_per_rank, const Topology& topology) {
  const int v = topology.stages_per_rank;
  const std::string name(strategy);
  if (v < min_stages_per_rank) {
    return InvalidArgument(name + " needs topology.stages_per_rank >= " +
                           std::to_string(min_stages_per_rank) + ", got " + std::to_string(v));
  }
  if (max_stages_per_rank > 0 && v > max_stages_per_rank) {
    return InvalidArgument(name + " supports topology.stages_per_rank <= " +
                           std::to_string(max_stages_per_rank) + ", got " + std::to_string(v));
  }
  return Status::Ok();
}

}  // namespace pipeplan
