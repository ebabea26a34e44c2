// Checks a plan's comm actions: endpoints that exist, sends after their producers and
// receives before their consumers, and per ordered rank pair the k-th send matching the k-th
// receive (NCCL matches by order).
#pragma once

#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

Status CheckComm(const Plan& plan);

}  // namespace pipeplan
