#include "host_steal.h"

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

}  // namespace pipeplan::testing
