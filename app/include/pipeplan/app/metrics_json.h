// The metrics of a simulated plan as one JSON object on one line: what 'pipeplan simulate
// --json' prints and what the Python entry point (torch_ext's pipeplan::plan op) returns, so
// the two agree byte for byte.
#pragma once

#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan::app {

// {"strategy", "ranks", "stages_per_rank", "microbatches", the step metrics, post-validation,
// then per rank "busy", "idle", "peak_activation_memory", "peak_memory"}, ending in "\n".
std::string RenderMetricsJson(const Plan& plan, const Timeline& timeline);

}  // namespace pipeplan::app
