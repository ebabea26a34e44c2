// A model of how torch's `_PipelineScheduleRuntime` runs a plan on NCCL (docs/torch-interop.md,
// "What torch's runtime makes of a plan"), beside the simulator's model of pipeplan's own runtime.
// torch runs each SEND and RECV of a rank's list as its own batch on the rank's one
// communicator, whose operations run one at a time in list order (one comm stream per rank).
// A transfer starts when both ends have reached it on their comm streams and the compute each
// end enqueued before it has finished (NCCL makes the comm stream wait for the compute
// stream); it lasts the boundary's transfer time (a receive at least the receive overhead).
// A compute action waits for its input's receive; an F&B cell runs its halves in turn. What a
// rank received or sent is held to the step's end. Pure and deterministic.
#pragma once

#include <cstdint>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// Which list torch runs: the plan's transfers as exported (`torch-csv-comms`), or the plan's
// compute order with the transfers torch adds itself (`torch-csv`, and the multi-stage schedule
// classes of torch, which lower their orders the same way: passes/torch_lowering.h).
enum class TorchLists : uint8_t {
  kPlanTransfers,
  kTorchLowering,
};

struct TorchRuntimeRun {
  Plan plan;  // the plan as torch runs it (for kTorchLowering: torch's transfers)
  Timeline timeline;
};

// Fails for what torch's runtime does not run (dual placement, post-validation), for a compute
// order torch's lowering cannot place, and where the lists would wait on each other forever
// under one comm stream per rank, naming each rank's waiting transfer (torch hangs there).
// The plan must be valid (ValidatePlan).
StatusOr<TorchRuntimeRun> SimulateOnTorchRuntime(const Plan& plan, TorchLists lists,
                                                 const CostModel& costs, const MemoryModel& memory);

}  // namespace pipeplan
