// What the ranks of a pipeplan-torch run hand to rank 0 through their coordinator
// (pipeplan/runtime/coordinator.h) besides their timelines (pipeplan/runtime/
// timeline_exchange.h): step records and the profile's B timed alone. Every rank publishes
// under its own keys; rank 0 gathers, waiting up to `timeout` for each key.
#pragma once

#include <chrono>
#include <map>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/coordinator.h"
#include "pipeplan/torch_ext/step_metrics.h"

namespace pipeplan::torch_ext {

// B timed alone after the steps (backward_reference.h), seconds by stage.
using FullBackwards = std::map<int, double>;

// This rank's stages' B alone; rank 0 gathers all `stages` of them.
Status PublishFullBackwards(runtime::Coordinator& coordinator, const FullBackwards& seconds);
StatusOr<FullBackwards> GatherFullBackwards(runtime::Coordinator& coordinator, int stages,
                                            std::chrono::milliseconds timeout);

// This rank's step records (step_metrics.h); rank 0 gathers those of `ranks` ranks.
Status PublishStepRecords(runtime::Coordinator& coordinator, RankId rank,
                          const std::vector<StepRecord>& records);
StatusOr<std::vector<std::vector<StepRecord>>> GatherStepRecords(runtime::Coordinator& coordinator,
                                                                 int ranks,
                                                                 std::chrono::milliseconds timeout);

}  // namespace pipeplan::torch_ext
