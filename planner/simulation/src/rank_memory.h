// Each rank's memory over a simulated step, from its program and action timings: shared by
// pipeplan's own runtime model (simulator.cc) and torch's (torch_runtime.cc).
#pragma once

#include <vector>

#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Fills the memory curve and peaks of every rank of `ranks` (index-aligned with `programs`,
// action timings set). `holds_to_step_end`: the runtime keeps what a stage received and sent
// until the step ends (torch's, which clears its stages' state then); otherwise a gradient
// sent to another rank is freed once it landed there (pipeplan's runtime).
void TrackRankMemory(const std::vector<RankProgram>& programs, const MemoryModel& memory,
                     const Topology& topology, bool holds_to_step_end,
                     std::vector<RankTimeline>& ranks);

}  // namespace pipeplan
