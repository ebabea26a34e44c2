// Post-validation pass (zero-bubble family, opt-in): the optimizer's global state (grad norm,
// inf/nan) travels from the last rank to rank 0 while the next step's first forwards already
// run on speculatively updated weights. Each rank gets [RECV_PV, SEND_PV, PV]; receives of
// activations the previous rank sent before its PV are tagged rollback (if validation fails
// they must still be drained, then the step is replayed).
#pragma once

#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Inserts PV where the reference places it. Rank r's PV time is the running max, from the
// last rank down, of (start of its chunk-0 forward of microbatch min(2(P-1-r), M-1)) - the
// latency into it; the compute and sends of r that are allowed (forward work only: chunk-0
// forwards and their sends, and on the last rank chunk 1 too) and happen before that time
// run before PV. Each receive goes to the side of PV its send is on, so every rank's program
// splits into a prefix and a suffix whose transfers match among themselves: the PV chain
// cannot close a cycle, and ZB-V tags exactly (P-1)^2 receives.
StatusOr<std::vector<RankProgram>> InsertPostValidation(std::vector<RankProgram> programs,
                                                        const StageMap& stages,
                                                        const CostModel& costs);

}  // namespace pipeplan
