// What torch's runtime does with a compute-only schedule (a `torch-csv` export, or the order of
// torch's own multi-stage schedule classes): it adds the transfers itself, before running. Its
// rule (torch.distributed.pipelining's `_add_send_recv`), restated: in rounds, each rank in rank
// order takes its next compute action if that action's input is there (a forward's input once
// the previous stage's forward of that microbatch was taken, by this rank or another; a
// backward's once the next stage's backward was), else it waits for the next round. Taking an
// action whose output goes to another rank appends the SEND right after it and the peer's RECV
// to the end of the peer's list at once, so receives sit early, where the sender computed, not
// where their consumer runs. Stages on the same rank hand over in memory.
#pragma once

#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// The programs torch's runtime would run for the compute actions of `programs` (their comm
// actions are ignored; post-validation is not torch's and is refused). Peers are set. Fails,
// naming each rank's waiting action, where torch's rounds stop making progress (torch raises
// there too). Dual placement (two model copies) is not torch's and is refused.
StatusOr<std::vector<RankProgram>> LowerAsTorch(const std::vector<RankProgram>& programs,
                                                const Topology& topology);

}  // namespace pipeplan
