// What the ranks of a multi-process run hand rank 0 through their coordinator (coordinator.h)
// once their steps are done: each measured step's RankTimeline (RunRank's), one key per rank
// and step, as a binary timeline file; rank 0 assembles one Timeline per step. And how they
// leave together, so that no rank loses the store inside the last exchange. Every call waits
// up to `timeout` for each key or barrier and fails naming it.
#pragma once

#include <chrono>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/coordinator.h"

namespace pipeplan::runtime {

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

// The last barrier. Rank 0 may host the store: it leaves last, once every other rank has
// passed the barrier.
Status LeaveTogether(Coordinator& coordinator, int rank, int world_size,
                     std::chrono::milliseconds timeout);

}  // namespace pipeplan::runtime
