// Checks post-validation structure: all or no ranks take part; each has one PV after its
// RECV_PV (from r+1) and SEND_PV (to r-1); only forward work comes before it; rollback flags
// sit exactly on the chunk-0 receives whose sends precede the sender's PV.
#pragma once

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

Status CheckPostValidation(const Plan& plan);

}  // namespace pipeplan
