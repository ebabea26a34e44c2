// What optimal.cc and solver_instance.cc share: the solver's integer figures (a duration or a
// byte count times the instance's scale) and its op count. Internal to the planner library.
#pragma once

#include <cmath>
#include <cstdint>

#include "pipeplan/model/topology.h"

namespace pipeplan::solver {

// `value` x `factor` as an integer: the nearest, rounded up, rounded down (a hair of slack
// either way, so a figure that scales to an integer stays that integer).
inline int64_t Nearest(double value, double factor) { return std::llround(value * factor); }
inline int64_t Up(double value, double factor) {
  return static_cast<int64_t>(std::ceil(value * factor - 1e-9));
}
inline int64_t Down(double value, double factor) {
  return static_cast<int64_t>(std::floor(value * factor + 1e-9));
}

// The solver's ops for one microbatch: F and I and W (split) or B, on every stage.
inline int64_t OpsPerMicrobatch(const Topology& t, bool split) {
  return int64_t{split ? 3 : 2} * t.num_stages();
}

}  // namespace pipeplan::solver
