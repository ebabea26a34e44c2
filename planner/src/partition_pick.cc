#include "partition_pick.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/text_format.h"

namespace pipeplan::partition_pick {
namespace {

// A candidate this close to the fastest (relative step) with fewer stages per rank is picked
// instead (two stages' actions at V = 2 where one would do at V = 1).
constexpr double kAsFast = 1e-3;

std::string NameOf(const PartitionCandidate& candidate) {
  return candidate.strategy + " (V=" + std::to_string(candidate.stages_per_rank) + ")";
}

// What to measure so that `assumes` (DescribeAssumption's words) is given instead.
std::string WhatToMeasure(const std::string& assumes) {
  std::string out;
  if (assumes.find("I + W = B") != std::string::npos) {
    // A layer trace's ranges time B whole: the split needs the layers timed apart.
    out = "backward_input and backward_weight (pipeplan.torch.measure_layers times them)";
  }
  if (assumes.find("B = I + W") != std::string::npos) {
    out += (out.empty() ? "" : ", and ") + std::string("backward");
  }
  return "give each layer's " + (out.empty() ? assumes : out);
}

std::vector<std::string> NotesOn(const std::vector<PartitionCandidate>& sorted, size_t pick) {
  const PartitionCandidate& picked = sorted[pick];
  if (!picked.assumes.empty()) {
    return {"every candidate's step rests on figures the layer costs do not give (" +
            picked.assumes + "); " + NameOf(picked) +
            " is fastest only as far as they hold: " + WhatToMeasure(picked.assumes)};
  }
  if (pick == 0) return {};
  const PartitionCandidate& fastest = sorted.front();
  return {NameOf(fastest) + " simulates " +
          FormatNumber(std::round((1.0 - fastest.makespan / picked.makespan) * 1000) / 10) +
          "% faster only if " + fastest.assumes +
          " (the layer costs do not give it), so it is not picked; " +
          WhatToMeasure(fastest.assumes)};
}

// Among the fitting candidates resting on given figures alone and within kAsFast of `pick`'s
// step, the one with the fewest stages per rank (the earliest of them; `pick` where none has
// fewer than it).
size_t SimplestAsFast(const std::vector<PartitionCandidate>& sorted, size_t pick) {
  size_t simplest = pick;
  for (size_t i = 0; i < sorted.size() && sorted[i].fits; ++i) {
    const PartitionCandidate& candidate = sorted[i];
    if (!candidate.assumes.empty()) continue;
    if (candidate.makespan > sorted[pick].makespan * (1 + kAsFast)) continue;
    if (candidate.stages_per_rank < sorted[simplest].stages_per_rank) simplest = i;
  }
  return simplest;
}

std::string AsFastNote(const PartitionCandidate& fastest, const PartitionCandidate& picked) {
  return NameOf(fastest) + " simulates " +
         FormatNumber(std::round((1.0 - fastest.makespan / picked.makespan) * 10000) / 100) +
         "% faster; " + NameOf(picked) +
         " is picked, as fast within 0.1% with fewer stages per rank (the runtime's own time "
         "per action, which the simulation leaves out, grows with them)";
}

}  // namespace

PickOfCandidates Pick(const std::vector<PartitionCandidate>& sorted) {
  PickOfCandidates pick;
  for (size_t i = 0; i < sorted.size() && sorted[i].fits; ++i) {
    if (sorted[i].assumes.empty()) {
      pick.index = i;
      break;
    }
  }
  pick.notes = NotesOn(sorted, pick.index);
  if (const size_t simplest = SimplestAsFast(sorted, pick.index); simplest != pick.index) {
    pick.notes.push_back(AsFastNote(sorted[pick.index], sorted[simplest]));
    pick.index = simplest;
  }
  return pick;
}

Status NothingFits(const PartitionRequest& request, const std::vector<PartitionCandidate>& sorted) {
  const PartitionCandidate* smallest = nullptr;
  for (const PartitionCandidate& candidate : sorted) {
    if (candidate.split.empty()) continue;
    if (smallest == nullptr || candidate.peak_memory < smallest->peak_memory) {
      smallest = &candidate;
    }
  }
  if (request.memory_limits.empty() || smallest == nullptr) {
    return sorted.front().status.ok() ? InvalidArgument("no candidate could be planned")
                                      : sorted.front().status;
  }
  if (request.memory_limits.size() == 1) {
    return FailedPrecondition(
        "no split fits memory limit " + InBytes().Describe(request.memory_limits.front()) +
        "; the smallest peak found is " + InBytes().Describe(smallest->peak_memory) + ", by " +
        NameOf(*smallest) + ": a limit of that fits");
  }
  std::string limits;
  for (const double limit : request.memory_limits) {
    limits += (limits.empty() ? "" : ", ") + InBytes().Describe(limit);
  }
  return FailedPrecondition("no split fits the memory limits per rank (" + limits +
                            "); the nearest, " + NameOf(sorted.front()) + ": " +
                            sorted.front().status.message());
}

MemoryModel InBytes() {
  MemoryModel bytes;
  bytes.unit = MemoryUnit::kBytes;
  return bytes;
}

}  // namespace pipeplan::partition_pick
