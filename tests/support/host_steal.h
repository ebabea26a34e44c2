// How much CPU time the virtual machine's host took away (steal time, from /proc/stat). Tests
// that compare measured time against a prediction use it to tell a slow run apart from one
// whose cores were taken: an attempt during which the host stole counts neither way.
#pragma once

#include <optional>
#include <string>

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

// The retry policy of tests that compare a measured time with a prediction: another attempt
// only after a miss (a burst of outside load can push one attempt over, a real miss repeats);
// a miss while the host stole more than kQuietSteal, or one the test saw disturbed itself,
// counts neither way; `quiet_misses` quiet misses end the attempts.
class TimingAttempts {
 public:
  TimingAttempts(double tolerance, int max_attempts, int quiet_misses)
      : tolerance_(tolerance), max_attempts_(max_attempts), quiet_misses_(quiet_misses) {}

  // Whether another attempt runs; starts measuring its host steal.
  bool Next();
  // The attempt's relative error (measured - predicted) / predicted; returns the share of
  // CPU time the host stole during the attempt. `disturbance`, where not empty, says how the
  // test saw the machine disturb the attempt where steal does not show it (steal is counted in
  // 10 ms ticks, so a thread that lost its core for a millisecond goes unseen).
  double Record(double error, const std::string& disturbance = "");

  int attempt() const { return attempt_; }  // 1-based, the one running or last run
  double error() const { return error_; }   // of the last attempt
  bool met() const;
  // Whether the result can be judged: met, or missed on enough quiet attempts.
  bool judged() const { return met() || quiet_missed_ >= quiet_misses_; }
  // Why the misses that did not count were disturbed ("host steal 4.1%; host steal 6.0%").
  const std::string& disturbed() const { return disturbed_; }

 private:
  double tolerance_;
  int max_attempts_;
  int quiet_misses_;
  int attempt_ = 0;
  int quiet_missed_ = 0;
  double error_ = 0.0;
  bool done_ = false;
  std::optional<CpuTimes> before_;
  std::string disturbed_;
};

}  // namespace pipeplan::testing
