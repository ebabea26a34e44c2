#include "host_steal.h"

#include <cmath>
#include <fstream>
#include <string>

namespace pipeplan::testing {

std::optional<CpuTimes> ReadCpuTimes() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu") {
    return std::nullopt;
  }
  return CpuTimes{user + nice + system + idle + iowait + irq + softirq + steal, steal};
}

double StealShare(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after) {
  if (!before || !after || after->total <= before->total) return 0.0;
  return (after->steal - before->steal) / (after->total - before->total);
}

bool TimingAttempts::Next() {
  if (done_ || attempt_ >= max_attempts_) return false;
  ++attempt_;
  before_ = ReadCpuTimes();
  return true;
}

double TimingAttempts::Record(double error, const std::string& disturbance) {
  const double steal = StealShare(before_, ReadCpuTimes());
  error_ = error;
  if (met()) {
    done_ = true;
    return steal;
  }
  const std::string why = steal > kQuietSteal
                              ? "host steal " + std::to_string(100 * steal).substr(0, 4) + "%"
                              : disturbance;
  if (why.empty()) {
    done_ = ++quiet_missed_ >= quiet_misses_;
  } else {
    disturbed_ += (disturbed_.empty() ? "" : "; ") + why;
  }
  return steal;
}

bool TimingAttempts::met() const { return attempt_ > 0 && std::abs(error_) < tolerance_; }

}  // namespace pipeplan::testing
