// What optimal.cc and solver_instance.cc share: the solver's integer figures (a duration or a
// byte count times the instance's scale) and its op count. Internal to the planner library.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/planner/optimal.h"

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

// The one cap on what the solver is given (kMaxSolverOps): a whole step's ops, or with
// `periodic` one microbatch's, the periodic solve's unit.
inline Status CheckSolverSize(const Topology& t, bool split, bool periodic) {
  const int64_t per_microbatch = OpsPerMicrobatch(t, split);
  const std::string cap =
      "the optimal strategies solve at most " + std::to_string(kMaxSolverOps) + " compute ops";
  const std::string shape =
      "P=" + std::to_string(t.ranks) + " V=" + std::to_string(t.stages_per_rank);
  if (periodic && per_microbatch > kMaxSolverOps) {
    return InvalidArgument(cap + " at once; one microbatch of " + shape + " has " +
                           std::to_string(per_microbatch) +
                           " (the periodic solve's unit; fewer ranks or stages)");
  }
  const int64_t whole = per_microbatch * t.microbatches;
  if (!periodic && whole > kMaxSolverOps) {
    return InvalidArgument(cap + "; " + shape + " M=" + std::to_string(t.microbatches) + " has " +
                           std::to_string(whole) + " (fewer microbatches or ranks)");
  }
  return Status::Ok();
}

}  // namespace pipeplan::solver
