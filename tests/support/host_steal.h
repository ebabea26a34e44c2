// How much CPU time the virtual machine's host took away (steal time, from /proc/stat). Tests
// that compare measured time against a prediction use it to tell a slow run apart from one
// whose cores were taken: an attempt during which the host stole counts neither way.
#pragma once

#include <optional>

namespace pipeplan::testing {

// The machine's CPU time so far: all of it and what the host stole (clock ticks).
struct CpuTimes {
  double total = 0;
  double steal = 0;
};

// Empty where /proc/stat cannot be read.
std::optional<CpuTimes> ReadCpuTimes();

// The share of CPU time the host stole between two readings (0 where it cannot be told).
double StealShare(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after);

// More of the CPU time stolen than this during an attempt: the attempt was disturbed.
inline constexpr double kQuietSteal = 0.02;

}  // namespace pipeplan::testing
