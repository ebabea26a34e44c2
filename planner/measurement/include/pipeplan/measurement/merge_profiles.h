// Profiles of different plans of one model, measured in one runtime, taken together: B from a
// 1F1B run, I and W from a zero-bubble run, F&B cells from an overlap run. Each figure comes
// from the profile that measured it with the most samples, and says which one that was, so
// that calibrate can tell measured figures from assumed ones.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/profile.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// Per stage, the index of the profile each kind came from; -1: no profile measured it. I and
// W come from one profile together (a split backward's halves belong to one run).
struct StageOrigins {
  int forward = -1;
  int backward = -1;
  int split = -1;
  int overlap = -1;
};

struct MergedProfile {
  Profile profile;
  std::vector<StageOrigins> origins;  // one per stage
  // One per profile, in order: the plan that ran and where ("1f1b P=2 V=1 M=8, torch cpu").
  std::vector<std::string> runs;
};

// Every profile must be valid and of the same cut of the model (stages and chains); errors
// name the profile by its index ("profiles[1] has 4 stages, profiles[0] has 2: ..."). Per
// stage and kind the figure with the most samples wins (ties: the earlier profile); memory
// figures likewise, field by field; per boundary the whole entry of the profile that measured
// most samples and the profiler's latency/bandwidth from the first that has them; static
// bytes from the first profile that counted them. steps is the sum, source and plan the
// distinct ones joined with "; ".
StatusOr<MergedProfile> MergeProfiles(const std::vector<Profile>& profiles);

}  // namespace pipeplan
