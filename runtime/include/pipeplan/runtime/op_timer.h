// OpTimer: the clock that times one rank's ops. The runtime marks each op as it goes and asks
// for the spans once the step is over, so a device clock resolves its marks then, without
// synchronising per op.
//
// Contract: one rank's step thread calls it, in program order: BeginStep first; ComputeBegins
// and ComputeEnded around each executor Run; GroupPosting and GroupPosted around each
// transport Post of a comm group; Landed when a transfer's Wait returned; Resolve after the
// executor's EndStep. Marks do not block on a device; Resolve may. Resolve's spans are on the
// host's steady clock (clock.h), so that every rank's timeline shares one axis, and cover every
// op marked since BeginStep. An error (a device call that failed) fails the step.
#pragma once

#include <cstddef>
#include <vector>

#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/clock.h"
#include "pipeplan/runtime/op_executor.h"

namespace pipeplan::runtime {

class OpTimer {
 public:
  virtual ~OpTimer() = default;

  // Recorded in the rank's timeline.
  virtual OpClock clock() const = 0;
  // A step of `actions` actions begins.
  virtual Status BeginStep(size_t actions) = 0;
  virtual Status ComputeBegins(size_t index) = 0;
  virtual Status ComputeEnded(size_t index) = 0;
  // Actions [begin, end) are about to be posted as one group, and have been.
  virtual Status GroupPosting(size_t begin, size_t end) = 0;
  virtual Status GroupPosted(size_t begin, size_t end) = 0;
  // The transport's own word on when transfer `index` completed (PendingOp::completed_at).
  virtual void Landed(size_t index, TimePoint completed) = 0;
  // A failed post-validation is about to run actions [0, end) again. A timer that can keeps
  // each one's first span, flagged discarded, when it is marked again (default: the replay's
  // spans replace them).
  virtual void Replaying(size_t /*end*/) {}
  // Every op marked this step: compute from its begin to its end, a transfer from its group's
  // post until it landed.
  virtual StatusOr<std::vector<OpSpan>> Resolve() = 0;
};

// The host's steady clock, read at each mark: what a CPU op's duration is. (On a GPU it would
// time kernel launches, not kernels: torch_ext's CUDA-event timer is for that.)
class HostOpTimer final : public OpTimer {
 public:
  OpClock clock() const override { return OpClock::kHost; }
  Status BeginStep(size_t actions) override;
  Status ComputeBegins(size_t index) override;
  Status ComputeEnded(size_t index) override;
  Status GroupPosting(size_t begin, size_t end) override;
  Status GroupPosted(size_t begin, size_t end) override;
  void Landed(size_t index, TimePoint completed) override;
  void Replaying(size_t end) override { replay_end_ = end; }
  StatusOr<std::vector<OpSpan>> Resolve() override;

 private:
  struct Mark {
    bool marked = false;
    OpSpan span;
  };
  // Before action `index` is marked again in a replay: keeps its first span.
  void Retire(size_t index);

  std::vector<Mark> marks_;  // by action index
  TimePoint posting_;
  size_t replay_end_ = 0;
  std::vector<OpSpan> discarded_;
};

}  // namespace pipeplan::runtime
