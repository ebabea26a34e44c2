// Which plans each runtime executes (`--runtime`). A plan is advice only where the user's
// runtime can run it: torch's _PipelineScheduleRuntime (and torchtitan, which loads the same
// CSV) runs any loop or V-shape order but has no post-validation step, no second model copy
// per rank (dual placement) and runs an F&B cell's halves in turn; Megatron-LM runs 1F1B and
// interleaved 1F1B (with its all-to-all overlap cells); pipeplan-torch runs every plan but a
// dual placement's.
#pragma once

#include <string_view>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/runtime_target.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Whether `runtime` executes plans of strategy `name` with `placement`, with post-validation
// where asked. The message names the runtime, what it cannot run and what to plan instead
// (fields as a request names them: options.post_validation, runtime).
Status CheckRunsOn(Runtime runtime, std::string_view name, Placement placement,
                   bool post_validation);

// Whether the runtime runs an F&B overlap cell's two halves one after the other: the cell then
// costs F + B whatever a cost file says (torch's runtime, torchtitan's unless it overlaps
// expert-parallel communication itself).
bool RunsCellsInTurn(Runtime runtime);

}  // namespace pipeplan
