// Chrome trace JSON (Perfetto, chrome://tracing): one process per rank, compute and comm on
// separate tracks.
#pragma once

#include <string>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

std::string ExportChromeTrace(const Plan& plan, const Timeline& timeline);

}  // namespace pipeplan
