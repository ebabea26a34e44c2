// One rank of a multi-process run, start to finish, in its own process (a torchrun rank, a
// child of pipeplan-torch's launcher): its steps (RunRank, each opened by a coordinator
// barrier), then the transport and timer released so that nothing still watches the store,
// its timelines published, the front end's own exchanges, rank 0 gathering every rank's
// steps and reporting, and the ranks leaving together (rank 0, which may host the store,
// last). The front end connects the executor, transport and coordinator; what only it knows
// (its own records to exchange, the report) comes in as hooks. Errors: the first failure;
// a failing step returns at once (RunRank has aborted the transport, so the others stop).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/coordinator.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/runtime/op_timer.h"
#include "pipeplan/runtime/rank_run.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

// What rank 0 gathered: one Timeline per measured step; without a step barrier also what
// each step added to the run and when it started (GatherTimelines' `added`, `starts`).
struct GatheredSteps {
  std::vector<Timeline> steps;
  std::vector<double> added;
  std::vector<double> starts;
};

struct RankSessionOptions {
  // The steps' options; `barrier` and `timer` are the session's (the coordinator's barrier
  // "step-N", the timer given to RunRankSession).
  RankRunOptions run;
  int world_size = 1;
  std::chrono::milliseconds timeout{30000};  // each exchange and barrier after the steps
  // Every rank, after its timelines are published: what the front end's rank 0 gathers
  // besides them. Null: nothing.
  std::function<Status(Coordinator&)> publish;
  // Rank 0, with every rank's steps: the front end's gathering and report. Its failure is
  // returned after the ranks left together. Null: nothing.
  std::function<Status(Coordinator&, const GatheredSteps&)> report;
};

// Runs `rank`'s part of `plan` as described above; `transport` and `timer` (null: the host
// clock) are released once the steps end.
Status RunRankSession(const Plan& plan, RankId rank, OpExecutor& executor,
                      std::unique_ptr<Transport> transport, std::unique_ptr<OpTimer> timer,
                      Coordinator& coordinator, RankSessionOptions options);

}  // namespace pipeplan::runtime
