// Facts about a plan that the commands print next to its metrics: post-validation (how many
// ranks run PV, how many receives are tagged rollback) and peak memory over ranks.
#pragma once

#include <cstddef>
#include <string>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan::app {

// The strategy a plan records: its provenance's ("auto -> zbv" for auto's pick), else the
// request's.
std::string PlanStrategyName(const Plan& plan);

struct PostValidationSummary {
  int ranks_with_pv = 0;      // ranks whose program holds a POST_VALIDATION action
  int rollback_receives = 0;  // RECV_F actions tagged rollback (CountRollbackReceives)
};

PostValidationSummary SummarizePostValidation(const Plan& plan);

// "post-validation: PV on every rank, 9 receives tagged rollback" ("PV on 3 of 4 ranks" when
// not all have one); empty for a plan without post-validation.
std::string PostValidationLine(const Plan& plan);

}  // namespace pipeplan::app
