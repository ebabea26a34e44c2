// BuildProfile: a Profile (model/profile.h) from measured Timelines of a plan.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// Quantiles interpolate linearly between the closest ranks (numpy's default): the q-quantile
// of n sorted values v[0..n-1] is v[i] + f (v[i+1] - v[i]) with i + f = q (n - 1). So the
// median of an even count is the mean of the middle two.
DurationStats SummarizeDurations(std::vector<double> samples);

struct ProfileOptions {
  double seconds_per_unit = 1.0;  // the timelines' time unit, in seconds
  std::string source;             // copied into Profile::source
  // How errors name steps[i] (e.g. the file it came from); "timeline i" where not given.
  std::vector<std::string> step_names;
};

// Profiles `steps`, measured timelines of `plan` (one per step, index-aligned with the plan's
// programs, as the runtime writes them). Every compute action contributes end - start to its
// stage and kind; every cross-rank SEND_F/SEND_B its transfer or its receive's overhead (see
// BoundaryProfile) to the boundary it crosses; post-validation transfers are left out. Sends and
// receives pair up as the transport matches them: in order per pair of ranks. Errors name the
// timeline (see step_names), the rank and the action: shapes that do not fit the plan, times that
// are not finite or run backwards, a receive that ends before its send started. An invalid
// plan (ValidatePlan) is refused first.
StatusOr<Profile> BuildProfile(const Plan& plan, std::span<const Timeline> steps,
                               const ProfileOptions& options);

}  // namespace pipeplan
