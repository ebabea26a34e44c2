// Watchdog: turns a stall into an error. It watches the progress of the ranks it can see
// (all of them in one process, or just its own) and follows each rank's waits across ranks to
// the one that holds it up. A stall is such a rank that has itself made no progress for the
// timeout, or a cycle of waits none of whose ranks has: waiting long on a busy, progressing
// peer is not one. It reports once: that rank, its action and every rank held up by it. A
// rank waiting on a peer it cannot see (another process) is judged by its own wait.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/runtime/rank_progress.h"

namespace pipeplan::runtime {

struct WatchedRank {
  const RankProgram* program = nullptr;
  const RankProgress* progress = nullptr;
};

// The diagnosis for the current state of `ranks`, or Ok when nothing has stalled for
// `timeout_seconds` by `now`. Deterministic for a given state; exposed for tests.
Status DiagnoseStall(const std::vector<WatchedRank>& ranks, double timeout_seconds, TimePoint now);

class Watchdog {
 public:
  // Polls `ranks` a few times per timeout; calls `on_stall` at most once, from its own thread,
  // with a DeadlineExceeded status. The ranks must outlive the watchdog.
  Watchdog(std::vector<WatchedRank> ranks, double timeout_seconds,
           std::function<void(const Status&)> on_stall);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void Loop(const std::stop_token& stop);

  std::vector<WatchedRank> ranks_;
  double timeout_seconds_;
  std::function<void(const Status&)> on_stall_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::jthread thread_;  // last: starts after the members it reads
};

// "the activation of stage 0 microbatch 3 from rank 1", "rank 2 to take the gradient of ...":
// what a comm action waits for, for error messages.
std::string DescribeWait(const Action& comm);

}  // namespace pipeplan::runtime
