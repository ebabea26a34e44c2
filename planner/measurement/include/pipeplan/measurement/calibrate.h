// Calibrate: turns a Profile (measured seconds) into a CostModel in a chosen time unit, per
// stage or uniform, with stated rules for what the profiled plan did not contain. The result
// is what 'pipeplan plan --costs' reads.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "pipeplan/measurement/merge_profiles.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

enum class TimeUnit : uint8_t { kSeconds, kMilliseconds, kMicroseconds, kNanoseconds };

std::string_view TimeUnitName(TimeUnit unit);  // "s", "ms", "us", "ns"
std::optional<TimeUnit> TimeUnitFromName(std::string_view name);
double SecondsPer(TimeUnit unit);

struct CalibrateOptions {
  TimeUnit unit = TimeUnit::kMicroseconds;  // the unit of the demo and the docs
  // Every stage's entry the same figures, every boundary's the same (means, see Calibrate),
  // instead of each its own: one entry per stage all the same, so that the file keeps the
  // depth of the model each is (a plan of another cut gets them cut again, stage_recut.h).
  bool uniform = false;
  // When a stage has B but no I and W measured (a plan without split backwards): the share
  // of B that is I; W gets the rest. 0.5 is what a cost file with only B means too.
  double input_share = 0.5;
};

// Per stage, every figure is the median of its samples converted to `unit`:
//   F        the median; a stage with no F measured is an error (so is one with no samples
//            at all), naming the stage.
//   B        the median; not measured: I + W.
//   I, W     the medians, both or neither (one without the other is an error); neither:
//            I = input_share * B and W = B - I. No B and no I/W is an error.
//   overlap  the median; not measured: 0, which the cost model reads as F + B of the cell.
// Per boundary: the profiled latency, bandwidth and activation bytes where a profiler
// measured them (latency or bandwidth > 0); else latency = the median clean transfer and
// bandwidth 0 (infinite): one message size per boundary does not separate the two. A
// boundary with neither (a same-rank hand-off, or only late receives) gets the mean of the
// boundaries that have one, or latency 0 if none has. The receive overhead is the mean of the
// boundary's measured receive overheads (the mean: the tail adds up along a step), or the
// mean over the boundaries that measured one, or 0.
// uniform: each stage figure is the mean over the stages of the per-stage results (overlap
// over the stages that measured it); the boundary entry is the mean over the measured
// boundaries (bandwidth and activation bytes over those that have them).
// Memory, where the profile counted bytes (MemoryUnit::kBytes): per stage the activation is
// the median bytes an F kept and freed_by_input the median an I freed (clamped to
// [0, activation]; W frees the rest); uniform: the means over the stages. Static memory: where
// the profile tells each stage's own (own_static_bytes), each stage gets its static_bytes but
// its data, the model's inputs and the loss's targets (StageMemoryProfile::input_bytes,
// target_bytes), which become first_stage_data_per_microbatch / last_stage_data_per_microbatch
// (over the stage's microbatches): they stay with a chain's ends however a plan cuts the model,
// and follow its M. static_per_rank is the largest rank's rest, so that a plan placing the
// stages otherwise (another V or shape) counts each rank's own; uniform: one stage's static is
// the mean of the stages between the first and the last, and what those two hold beyond it
// (embedding, loss) is first_stage_static / last_stage_static. Otherwise
// static_per_rank is the largest static memory of any rank, static_by_rank each rank's where they
// differ. A stage with no F counted, an F that keeps nothing, or a backward that frees more than
// 25% above what its F kept (B, or I and W together; medians: a backward also frees its received
// gradient's buffer) is an error naming the stage and field. The result is in `unit` and passes
// ValidateCostModel.
// `sources` say per stage which figures were measured, and in which run (`runs`), and which
// derived (assumed): B where no run ran a full backward, I and W where none split it, the
// F&B cell where none ran one.
StatusOr<CostModel> Calibrate(const Profile& profile, const CalibrateOptions& options);
// Profiles of different plans of one model calibrated together (MergeProfiles): each figure
// from the run that measured it, so that B from a 1F1B run and I and W from a zero-bubble run
// are all measured.
StatusOr<CostModel> Calibrate(const std::vector<Profile>& profiles,
                              const CalibrateOptions& options);
// The same for profiles merged already (a front end that also shows the merged figures).
StatusOr<CostModel> Calibrate(const MergedProfile& merged, const CalibrateOptions& options);

}  // namespace pipeplan
