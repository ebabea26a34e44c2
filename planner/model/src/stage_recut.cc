#include "pipeplan/model/stage_recut.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "pipeplan/model/figure_sources.h"

namespace pipeplan {
namespace {

// The fraction of old stage i (of `from`) that new stage j (of `to`) covers. Depth is counted
// in units of 1 / (from x to): old stage i spans [i x to, (i + 1) x to), new stage j spans
// [j x from, (j + 1) x from).
double Covered(int i, int from, int j, int to) {
  const int64_t lo = std::max<int64_t>(int64_t{i} * to, int64_t{j} * from);
  const int64_t hi = std::min<int64_t>(int64_t{i + 1} * to, int64_t{j + 1} * from);
  return hi > lo ? static_cast<double>(hi - lo) / to : 0.0;
}

// The old stages that new stage j overlaps: [first, last).
std::pair<int, int> OldStagesUnder(int j, int from, int to) {
  const auto first = static_cast<int>(int64_t{j} * from / to);
  const auto last = static_cast<int>((int64_t{j + 1} * from + to - 1) / to);
  return {first, std::min(last, from)};
}

// Of `given` boundaries (one chain of given + 1 stages), the one nearest in depth to new
// boundary k of a chain of `stages` stages; the lower one on a tie.
int NearestBoundary(int k, int stages, int given) {
  // Boundary i sits at depth (i + 1) / (given + 1), boundary k at (k + 1) / stages: the two
  // given ones around it are the candidates.
  const auto distance = [&](int i) {
    return std::llabs(int64_t{k + 1} * (given + 1) - int64_t{i + 1} * stages);
  };
  const auto below = static_cast<int>(int64_t{k + 1} * (given + 1) / stages) - 1;
  const int lower = std::clamp(below, 0, given - 1);
  const int upper = std::clamp(below + 1, 0, given - 1);
  return distance(upper) < distance(lower) ? upper : lower;
}

std::vector<StageCosts> RecutStageCosts(const std::vector<StageCosts>& given, int stages) {
  const int from = static_cast<int>(given.size());
  const bool any_overlap =
      std::any_of(given.begin(), given.end(), [](const StageCosts& c) { return c.overlap > 0; });
  std::vector<StageCosts> out(static_cast<size_t>(stages), StageCosts{0, 0, 0, 0, 0});
  for (int j = 0; j < stages; ++j) {
    StageCosts& cut = out[j];
    const auto [lo, hi] = OldStagesUnder(j, from, stages);
    for (int i = lo; i < hi; ++i) {
      const double f = Covered(i, from, j, stages);
      if (f == 0) continue;
      const StageCosts& c = given[i];
      cut.forward += f * c.forward;
      cut.backward += f * c.backward;
      cut.backward_input += f * c.backward_input;
      cut.backward_weight += f * c.backward_weight;
      // 0 means F + B: kept where every stage has it, resolved where some do not.
      if (any_overlap) cut.overlap += f * (c.overlap > 0 ? c.overlap : c.forward + c.backward);
    }
  }
  return out;
}

std::vector<BoundaryCosts> RecutBoundaries(const std::vector<BoundaryCosts>& given, int stages) {
  if (stages <= 1) return {given.front()};
  std::vector<BoundaryCosts> out;
  const int from = static_cast<int>(given.size());
  for (int k = 0; k + 1 < stages; ++k) out.push_back(given[NearestBoundary(k, stages, from)]);
  return out;
}

// Two copies of a chain's entries, for dual placement's two chains; between them a filler
// boundary no transfer crosses.
template <typename Entry>
std::vector<Entry> TwoChains(std::vector<Entry> chain, const Entry* filler = nullptr) {
  std::vector<Entry> both = chain;
  if (filler != nullptr) both.push_back(*filler);
  both.insert(both.end(), chain.begin(), chain.end());
  return both;
}

// One copy's entries of figures that describe `chains` copies of the model one after another:
// the first (a dual placement's copy A, which runs the same layers as copy B). `boundaries`:
// the entries lie between stages, one fewer than the stages (a chain of one stage keeps the
// first as its uniform entry).
template <typename Entry>
std::vector<Entry> FirstCopy(const std::vector<Entry>& entries, int chains, bool boundaries) {
  if (chains <= 1 || entries.size() <= 1) return entries;
  const size_t stages = boundaries ? entries.size() + 1 : entries.size();
  const size_t count =
      std::max<size_t>(1, stages / static_cast<size_t>(chains) - (boundaries ? 1 : 0));
  return {entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(count)};
}

}  // namespace

CostModel RecutChainCosts(const CostModel& costs, int stages) {
  CostModel out = costs;
  if (costs.stages.size() > 1 && costs.stages.size() != static_cast<size_t>(stages)) {
    out.stages = RecutStageCosts(costs.stages, stages);
    out.sources = CollapseSources(costs.sources, stages);
  }
  const size_t boundaries = static_cast<size_t>(std::max(stages, 2) - 1);
  if (costs.boundaries.size() > 1 && costs.boundaries.size() != boundaries) {
    out.boundaries = RecutBoundaries(costs.boundaries, stages);
  }
  return out;
}

MemoryModel RecutChainMemory(const MemoryModel& memory, int given_chunks_per_share, int stages) {
  const int from = static_cast<int>(memory.stages.size());
  if (from <= 1 || from == stages) return memory;
  const int chunks = std::max(1, given_chunks_per_share);
  // The model's messages: every boundary passes the same kind of tensor.
  double message_in = 0.0;
  double message_grad = 0.0;
  double retained = 0.0;
  for (int i = 0; i < from; ++i) {
    const StageMemory& m = memory.stages[i];
    message_in =
        std::max(message_in, std::min(m.received_input, memory.Activation(StageId(i), chunks)));
    message_grad = std::max(message_grad, m.received_gradient);
    retained = std::max(retained, memory.Retained(StageId(i), chunks));
  }
  MemoryModel out = memory;
  out.stages.assign(static_cast<size_t>(stages), StageMemory{});
  for (int j = 0; j < stages; ++j) {
    StageMemory& cut = out.stages[j];
    const auto [lo, hi] = OldStagesUnder(j, from, stages);
    for (int i = lo; i < hi; ++i) {
      const double f = Covered(i, from, j, stages);
      if (f == 0) continue;
      const StageMemory& m = memory.stages[i];
      const double activation = memory.Activation(StageId(i), chunks);
      cut.activation += f * (activation - std::min(m.received_input, activation));
      cut.freed_by_input += f * memory.FreedByInput(StageId(i), chunks);
      cut.static_bytes += f * m.static_bytes;
      cut.gradient += f * m.gradient;
      cut.allocated_by_input += f * m.allocated_by_input;
      cut.split_retained_extra += f * m.split_retained_extra;
      cut.forward_transient = std::max(cut.forward_transient, m.forward_transient);
      cut.backward_transient = std::max(cut.backward_transient, m.backward_transient);
      cut.input_transient = std::max(cut.input_transient, m.input_transient);
      cut.weight_transient = std::max(cut.weight_transient, m.weight_transient);
    }
    const bool first = j == 0;
    const bool last = j == stages - 1;
    cut.received_input = first ? 0.0 : message_in;
    cut.activation += cut.received_input;
    cut.retained = first ? 0.0 : std::min(retained, cut.activation);
    cut.received_gradient =
        last ? 0.0 : std::min(message_grad, std::max(cut.backward_transient, cut.input_transient));
  }
  return out;
}

namespace {

// Which of the figures' per-stage lists FitStageFigures cuts again for `topology`: those that
// have more than one entry and not one per stage (or boundary), or are of other chains.
struct Misfits {
  bool stages = false;
  bool boundaries = false;
  bool memory = false;

  bool any() const { return stages || boundaries || memory; }
};

Misfits MisfitsOf(const CostModel& costs, const MemoryModel& memory, const Topology& topology) {
  const int stages = topology.num_stages();
  const int chains = ChainsOf(topology);
  const auto misfit = [&](size_t entries, int wanted, int given_chains) {
    return entries > 1 && (entries != static_cast<size_t>(std::max(wanted, 1)) ||
                           std::max(given_chains, 1) != chains);
  };
  return {.stages = misfit(costs.stages.size(), stages, costs.chains),
          .boundaries = misfit(costs.boundaries.size(), stages - 1, costs.chains),
          .memory = misfit(memory.stages.size(), stages, memory.chains)};
}

}  // namespace

bool FitsAsGiven(const CostModel& costs, const MemoryModel& memory, const Topology& topology) {
  return !MisfitsOf(costs, memory, topology).any();
}

StatusOr<StageFigures> FitStageFigures(const CostModel& costs, const MemoryModel& memory,
                                       const Topology& topology) {
  const int stages = topology.num_stages();
  const int chains = ChainsOf(topology);
  const Misfits misfits = MisfitsOf(costs, memory, topology);
  StageFigures out{costs, memory};
  // Static memory measured per rank of another number of ranks: every rank the largest, an
  // upper bound (the ranks' own parts differ where they took turns on one device).
  std::vector<double>& by_rank = out.memory.static_by_rank;
  if (!by_rank.empty() && by_rank.size() != static_cast<size_t>(topology.ranks)) {
    PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(memory, static_cast<int>(memory.stages.size())));
    out.memory.static_per_rank =
        std::max(out.memory.static_per_rank, *std::max_element(by_rank.begin(), by_rank.end()));
    by_rank.clear();
  }
  if (!misfits.any()) return out;
  const size_t given_stages = costs.stages.size() > 1       ? costs.stages.size()
                              : costs.boundaries.size() > 1 ? costs.boundaries.size() + 1
                                                            : 1;
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(costs, static_cast<int>(given_stages)));
  PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(memory, static_cast<int>(memory.stages.size())));

  // One chain of the model, cut again for the topology's chains: under dual placement each of
  // its two copies is the whole model.
  CostModel one_chain = costs;
  one_chain.stages = FirstCopy(costs.stages, costs.chains, false);
  one_chain.sources = FirstCopy(costs.sources, costs.chains, false);
  one_chain.boundaries = FirstCopy(costs.boundaries, costs.chains, true);
  MemoryModel one_chain_memory = memory;
  one_chain_memory.stages = FirstCopy(memory.stages, memory.chains, false);
  const bool dual = chains == 2;
  const int chain = dual ? topology.ranks : stages;
  const CostModel cut = RecutChainCosts(one_chain, chain);
  // A chain cut to one entry is uniform: every stage of both copies has it, as it stands.
  const bool two_copies = dual && cut.stages.size() > 1;
  if (misfits.stages) {
    out.costs.stages = two_copies ? TwoChains(cut.stages) : cut.stages;
    out.costs.sources = two_copies && !cut.sources.empty() ? TwoChains(cut.sources) : cut.sources;
  }
  if (misfits.boundaries) {
    out.costs.boundaries = cut.boundaries;
    if (dual && cut.boundaries.size() > 1) {
      out.costs.boundaries = TwoChains(cut.boundaries, &cut.boundaries.back());
    }
  }
  if (misfits.stages || misfits.boundaries) out.costs.chains = chains;
  if (misfits.memory) {
    const int given_chunks =
        std::max(1, static_cast<int>(one_chain_memory.stages.size()) / topology.ranks);
    out.memory.stages = RecutChainMemory(one_chain_memory, given_chunks, chain).stages;
    if (dual && out.memory.stages.size() > 1) out.memory.stages = TwoChains(out.memory.stages);
    out.memory.chains = chains;
  }
  // Figures that fit a double each can sum past it when several stages become one.
  const std::string recut = "the figures cut by depth from " + std::to_string(given_stages) +
                            " stages to " + std::to_string(stages);
  if (Status fits = ValidateCostModel(out.costs, stages); !fits.ok()) {
    return fits.WithContext(recut);
  }
  if (Status fits = ValidateMemoryModel(out.memory, stages); !fits.ok()) {
    return fits.WithContext(recut);
  }
  return out;
}

}  // namespace pipeplan
