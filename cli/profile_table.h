// The tables 'pipeplan profile' and 'pipeplan calibrate' print: a profile's per-stage medians
// and spreads and its transfers, and a calibrated cost model marking what was derived by
// Calibrate's rules rather than measured.
#pragma once

#include <string>

#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/profile.h"

namespace pipeplan::cli {

// Per stage the median of every kind measured on some stage, with its spread (p90 - p10 as
// a share of the median); per boundary the transfers. Times in `unit`.
std::string RenderProfileTable(const Profile& profile, TimeUnit unit);

// `costs` is Calibrate(profile, options): per stage (one row "all" when uniform) F, B, I, W
// and, if any stage measured one, overlap, in options.unit; `*` marks figures derived rather
// than measured, with a legend; then per boundary the latency and bandwidth.
std::string RenderCalibrationTable(const Profile& profile, const CostModel& costs,
                                   const CalibrateOptions& options);

}  // namespace pipeplan::cli
