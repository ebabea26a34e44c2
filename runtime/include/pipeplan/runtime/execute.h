// Executing one rank's program for one step (docs/runtime.md): consecutive comm actions are posted
// as one group at their slot; a RECV is waited right before the compute that consumes it; a SEND
// completes in the background and is waited at the end of the step; every action is timed.
// A failed post-validation drains the stale messages and runs the actions before the PV again.
// The plan must have passed validation and the deadlock dry run (CheckBeforeLaunch).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <stop_token>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/clock.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/runtime/op_timer.h"
#include "pipeplan/runtime/rank_progress.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

// Refuses a plan that is invalid or would deadlock, naming the problem (validator message,
// or the cycle of waiting ranks), or one whose failed post-validation could not be replayed
// (a forward sent before its rank's PV to a receive not tagged rollback).
Status CheckBeforeLaunch(const Plan& plan);

// One rank's program with what the step loop needs precomputed: the comm groups and, for
// every compute action, the receives it consumes.
class PreparedProgram {
 public:
  explicit PreparedProgram(const RankProgram& program);

  const RankProgram& program() const { return *program_; }
  // Receives consumed by compute action `index` (empty for comm actions).
  const std::vector<size_t>& InputsOf(size_t index) const { return inputs_[index]; }
  // One past the last comm action of the group that starts at `index`.
  size_t GroupEnd(size_t index) const { return group_end_[index]; }
  // The PV action, or kNoAction. The actions before replay_end() are those a failed validation
  // runs again; from there to the PV come its RECV_PV and SEND_PV.
  size_t validation() const { return validation_; }
  size_t replay_end() const { return replay_end_; }

 private:
  const RankProgram* program_;
  size_t validation_;
  size_t replay_end_;
  std::vector<std::vector<size_t>> inputs_;
  std::vector<size_t> group_end_;
};

struct StepOptions {
  int step = 0;
  TimePoint epoch;                   // time zero of the step's timeline, common to all ranks
  double seconds_per_unit = 1.0;     // the timeline's time unit, in seconds
  RankProgress* progress = nullptr;  // published for the watchdog, when there is one
  OpTimer* timer = nullptr;          // times the ops; null: the host clock (HostOpTimer)
  // Ranks that share one device (threads on one GPU) and must not overlap: each holds this
  // around every executor call and each compute op with its timing marks, so that one op runs
  // at a time and its time is its own. Never held while posting or waiting. Null: no sharing.
  std::mutex* shared_device = nullptr;
  // Requested on failure (and by whoever watches): the executor's calls see it and return.
  std::stop_source stop;
  // The run's last step ends with the synchronous gradient-state exchange even with
  // post-validation: no later PV would judge a speculative update.
  bool last_step = false;
  // Set where steps follow each other without a barrier: post-validation's end-of-step sends
  // (rank r's states to rank r+1) are left here instead of waited, so the rank goes on to its
  // next step; they are waited before the next exchange touches their buffers. Null: waited.
  std::vector<std::unique_ptr<PendingOp>>* state_sends = nullptr;
};

// Runs one step of `program`. On failure the error names the rank and the action; the
// transport is aborted and `stop` requested, so every other rank stops too. Executor
// exceptions become errors. Timings are in the step's unit, from `epoch`, as the timer
// measured them, except where the executor's meter reports its own spans (OpMeter::TakeOpSpans).
StatusOr<RankTimeline> ExecuteStep(const PreparedProgram& program, OpExecutor& executor,
                                   Transport& transport, const StepOptions& options);

}  // namespace pipeplan::runtime
