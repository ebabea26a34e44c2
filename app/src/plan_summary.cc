#include "pipeplan/app/plan_summary.h"

#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/topology.h"

namespace pipeplan::app {

std::string PlanStrategyName(const Plan& plan) {
  return plan.provenance.strategy.empty() ? plan.request.strategy : plan.provenance.strategy;
}

PostValidationSummary SummarizePostValidation(const Plan& plan) {
  PostValidationSummary summary;
  for (const RankProgram& program : plan.programs) {
    summary.ranks_with_pv += HasPostValidation(program) ? 1 : 0;
  }
  summary.rollback_receives = CountRollbackReceives(plan);
  return summary;
}

std::string PostValidationLine(const Plan& plan) {
  const PostValidationSummary pv = SummarizePostValidation(plan);
  if (pv.ranks_with_pv == 0 && pv.rollback_receives == 0) return "";
  const int ranks = static_cast<int>(plan.programs.size());
  std::string where = "every rank";
  if (pv.ranks_with_pv != ranks) {
    where = std::to_string(pv.ranks_with_pv) + " of " + std::to_string(ranks) + " ranks";
  }
  return "post-validation: PV on " + where + ", " + std::to_string(pv.rollback_receives) +
         (pv.rollback_receives == 1 ? " receive" : " receives") + " tagged rollback";
}

}  // namespace pipeplan::app
