// What the ranks of a multi-process run hand to rank 0 through the rendezvous store
// (coordinator.h) once their steps are done: measured timelines, step records, and the
// profile's B timed alone; and how they leave together. Every rank publishes under its own
// keys; rank 0 gathers, waiting up to `timeout` for each key.
#pragma once

#include <chrono>
#include <map>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/torch_ext/coordinator.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/step_metrics.h"

namespace pipeplan::torch_ext {

// B timed alone after the steps (backward_reference.h), seconds by stage.
using FullBackwards = std::map<int, double>;

// Each measured step of this rank, one key per step.
Status PublishTimelines(Coordinator& coordinator, RankId rank, std::vector<RankTimeline> steps);
// Rank 0: every rank's steps, assembled into one Timeline per measured step. With `added`
// the ranks' steps were timed from the run's start (no step barrier): each step is moved to
// start at its earliest action, and `added` gets, from the second step on, what each added to
// the run (its end, start plus makespan, less the previous step's, in the timelines' unit),
// and `starts`, if given, each step's start on the run's clock.
StatusOr<std::vector<Timeline>> GatherTimelines(Coordinator& coordinator, const Plan& plan,
                                                int steps, std::chrono::milliseconds timeout,
                                                std::vector<double>* added = nullptr,
                                                std::vector<double>* starts = nullptr);

// This rank's stages' B alone; rank 0 gathers all `stages` of them.
Status PublishFullBackwards(Coordinator& coordinator, const FullBackwards& seconds);
StatusOr<FullBackwards> GatherFullBackwards(Coordinator& coordinator, int stages,
                                            std::chrono::milliseconds timeout);

// This rank's step records (step_metrics.h); rank 0 gathers those of `ranks` ranks.
Status PublishStepRecords(Coordinator& coordinator, RankId rank,
                          const std::vector<StepRecord>& records);
StatusOr<std::vector<std::vector<StepRecord>>> GatherStepRecords(Coordinator& coordinator,
                                                                 int ranks,
                                                                 std::chrono::milliseconds timeout);

// The last barrier. Rank 0 may host the store (--local-ranks): it leaves last, once every
// other rank has passed the barrier, so no rank loses the store inside it.
Status LeaveTogether(Coordinator& coordinator, const Rendezvous& r,
                     std::chrono::milliseconds timeout);

}  // namespace pipeplan::torch_ext
