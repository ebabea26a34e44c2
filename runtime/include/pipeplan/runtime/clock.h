// The runtime's one clock: a steady, monotonic clock shared by every rank of a process (and by
// processes on one machine), so per-rank timings line up on one axis.
#pragma once

#include <chrono>

namespace pipeplan::runtime {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// Seconds from `from` to `to`, as a double.
inline double SecondsBetween(TimePoint from, TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

inline TimePoint AfterSeconds(TimePoint from, double seconds) {
  return from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace pipeplan::runtime
