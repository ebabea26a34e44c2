// The whole synthetic set-up in one call: one synthetic executor per rank (one of them
// optionally injecting a fault) over in-process transports, run by RunLocal. What 'pipeplan
// run', the runtime tests and the overhead bench share.
#pragma once

#include <optional>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"

namespace pipeplan::runtime {

StatusOr<std::vector<Timeline>> RunSyntheticInProcess(const Plan& plan,
                                                      const SyntheticOptions& synthetic,
                                                      const LocalRunOptions& options,
                                                      const std::optional<Fault>& fault = {});

}  // namespace pipeplan::runtime
