// What one rank is doing right now, published by the thread that executes its program and
// read by the watchdog. Each update stamps the time, so a stall shows as an old stamp.
#pragma once

#include <cstddef>
#include <limits>
#include <mutex>

#include "pipeplan/runtime/clock.h"

namespace pipeplan::runtime {

enum class Activity : uint8_t {
  kIdle,        // not started, or between steps
  kBeginning,   // inside the executor's BeginStep
  kRunning,     // inside the executor for `action_index` (compute, PV, message buffers)
  kWaiting,     // action `action_index` waits for transfer `waited_index` to complete
  kFinishing,   // end of step: waits for transfer `waited_index` (a SEND, or an unused RECV)
  kExchanging,  // end of step: waits for every other rank's gradient state (op_executor.h)
  kMirroring,   // end of step: adds gradients with mirror rank `waited_index` (op_executor.h)
  kEnding,      // inside the executor's EndStep (the optimizer step)
  kDone,        // finished or failed; nothing left to watch
};

inline constexpr size_t kNoAction = std::numeric_limits<size_t>::max();

struct ProgressSnapshot {
  Activity activity = Activity::kIdle;
  size_t action_index = kNoAction;
  size_t waited_index = kNoAction;
  TimePoint since;
};

class RankProgress {
 public:
  void Set(Activity activity, size_t action_index, size_t waited_index = kNoAction) {
    const TimePoint now = Clock::now();
    const std::lock_guard lock(mutex_);
    state_ = {activity, action_index, waited_index, now};
  }
  ProgressSnapshot Read() const {
    const std::lock_guard lock(mutex_);
    return state_;
  }

 private:
  mutable std::mutex mutex_;
  ProgressSnapshot state_{Activity::kIdle, kNoAction, kNoAction, Clock::now()};
};

}  // namespace pipeplan::runtime
