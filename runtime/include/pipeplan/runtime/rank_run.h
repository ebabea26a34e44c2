// Running one rank of a plan in a process of its own (torchrun, or 'pipeplan-torch run
// --local-ranks'): warm-up plus measured steps, each opened by a barrier with the other
// processes (or only the first: step_barrier), under a watchdog that sees this rank only. The
// multi-process counterpart of RunLocal; the caller gathers the ranks' timelines
// (simulation/measured_timeline.h).
#pragma once

#include <functional>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/runtime/op_timer.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

struct RankRunOptions {
  int steps = 5;
  int warmup = 1;
  double timeout_seconds = 30.0;  // no progress for this long fails the step
  double seconds_per_unit = 1.0;  // the unit of the returned timelines, in seconds
  // Called before each step; returns once every rank is there. Time zero of the step's
  // timeline is taken right after it (ranks on one host share the steady clock).
  std::function<Status(int step)> barrier;
  // false: only the first step opens with the barrier; each later one starts as soon as this
  // rank ended its last (post-validation's end-of-step sends are waited at the next step's
  // end), and every timeline counts from the first barrier, the run's start, for the caller
  // to rebase each step to its earliest rank (ShiftRankTimeline).
  bool step_barrier = true;
  // Times the ops (a device clock: torch_ext's CUDA-event timer); null: the host clock.
  OpTimer* timer = nullptr;
};

// Validates and dry-runs the plan, then runs rank `rank`'s program: one RankTimeline per
// measured step. On failure the transport is aborted (so the other ranks stop) and the
// error names this rank and action, or the stall.
StatusOr<std::vector<RankTimeline>> RunRank(const Plan& plan, RankId rank, OpExecutor& executor,
                                            Transport& transport, const RankRunOptions& options);

}  // namespace pipeplan::runtime
