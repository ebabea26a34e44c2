// One measured step as a Timeline, from the per-rank timings that measured it: 'pipeplan run'
// and pipeplan-torch (one process per rank) and the torch.profiler trace import all end here,
// so every measured timeline is aligned and summarised the same way.
#pragma once

#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// `ranks` holds every rank's timings of one step (index = rank, each index-aligned with its
// program). Corrects the ranks' clock skew first (clock_alignment.h; the offsets go to
// `shifts` when given), then fills busy time and the step metrics. Memory fields are kept.
StatusOr<Timeline> AssembleMeasuredTimeline(const Plan& plan, std::vector<RankTimeline> ranks,
                                            std::vector<double>* shifts = nullptr);

}  // namespace pipeplan
