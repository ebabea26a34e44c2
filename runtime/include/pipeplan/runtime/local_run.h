// Running a whole plan in this process: one thread per rank, a watchdog over all of them, and
// warm-up plus measured steps. The in-process counterpart of launching P processes.
#pragma once

#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/runtime/op_timer.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

struct StepReport {
  int step = 0;  // 0-based, warm-up steps included
  bool warmup = false;
  // Wall time of the step; without a step barrier, from the previous step's end (its last
  // action on any rank) to this one's, the time the step adds to the run.
  double seconds = 0.0;
  // The step's time zero (its timeline's 0), in seconds since the run's first step began:
  // with the barrier, when the barrier let the ranks go; without, the earliest rank's start
  // of the step, which can precede the previous step's end (step k + 1 over step k's tail).
  double start = 0.0;
  // Each rank's start of the step on the same clock, in rank order: `start` for every rank
  // with the barrier; without it, when each rank ended its previous step.
  std::vector<double> rank_starts;
  const Timeline* timeline = nullptr;
};

struct LocalRunOptions {
  int steps = 5;                  // measured steps
  int warmup = 1;                 // steps run first and not returned
  double timeout_seconds = 30.0;  // a rank with no progress for this long fails the run
  double seconds_per_unit = 1.0;  // the unit of the returned timelines, in seconds
  std::function<void(const StepReport&)> on_step;  // progress, called after every step
  // Rank r's op timer (a device clock); empty: every rank on the host clock.
  std::vector<OpTimer*> timers;
  // Ranks that share one device run one op at a time (StepOptions::shared_device); null:
  // they run concurrently.
  std::mutex* shared_device = nullptr;
  // true: every step opens on all ranks at once (a barrier), and time zero is that instant.
  // false: each rank starts its next step as soon as it ended its last, so step k + 1's first
  // actions overlap step k's tail where their inputs (and post-validation's speculative
  // update) allow; a step's timeline then starts at its earliest rank's start, and each rank's
  // actions sit where they ran relative to that.
  bool step_barrier = true;
};

// Checks the plan (validation and deadlock dry run), then runs warm-up and measured steps:
// rank r on its own thread with executors[r] and transports[r]. Returns one measured
// Timeline per measured step. The first failure stops every rank and is returned: an
// executor error names the rank and action; a stall names what the stuck rank waits for.
// No thread outlives the call. The executors must stop promptly when their stop token is
// requested.
StatusOr<std::vector<Timeline>> RunLocal(const Plan& plan, std::span<OpExecutor* const> executors,
                                         std::span<Transport* const> transports,
                                         const LocalRunOptions& options);

}  // namespace pipeplan::runtime
