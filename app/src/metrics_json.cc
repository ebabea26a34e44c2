#include "pipeplan/app/metrics_json.h"

#include <algorithm>
#include <vector>

#include "pipeplan/app/format.h"
#include "pipeplan/app/plan_summary.h"

namespace pipeplan::app {

std::string RenderMetricsJson(const Plan& plan, const Timeline& timeline) {
  const Metrics& m = timeline.metrics;
  const Topology& t = plan.request.topology;
  std::vector<double> busy;
  std::vector<double> idle;
  std::vector<double> peak_activation;
  std::vector<double> peak;
  for (const RankTimeline& rank : timeline.ranks) {
    busy.push_back(rank.busy);
    idle.push_back(std::max(0.0, m.makespan - rank.busy));
    peak_activation.push_back(rank.peak_activation_memory);
    peak.push_back(rank.peak_memory);
  }
  std::string out = "{";
  out += "\"strategy\":" + JsonString(PlanStrategyName(plan));
  out += ",\"ranks\":" + std::to_string(t.ranks);
  out += ",\"stages_per_rank\":" + std::to_string(t.stages_per_rank);
  out += ",\"microbatches\":" + std::to_string(t.microbatches);
  out += ",\"makespan\":" + JsonNumber(m.makespan);
  out += ",\"zb_bubble_rate\":" + JsonNumber(m.zb_bubble_rate);
  out += ",\"bubble_fraction_max\":" + JsonNumber(m.bubble_fraction_max);
  out += ",\"bubble_fraction_mean\":" + JsonNumber(m.bubble_fraction_mean);
  out += ",\"lower_bound\":" + JsonNumber(m.lower_bound);
  out += ",\"gap_to_lower_bound\":" + JsonNumber(m.gap_to_lower_bound);
  const PostValidationSummary pv = SummarizePostValidation(plan);
  out += ",\"post_validation\":";
  out += pv.ranks_with_pv > 0 ? "true" : "false";
  out += ",\"rollback_receives\":" + std::to_string(pv.rollback_receives);
  out += ",\"busy\":" + JsonArray(busy);
  out += ",\"idle\":" + JsonArray(idle);
  out += ",\"peak_activation_memory\":" + JsonArray(peak_activation);
  out += ",\"peak_memory\":" + JsonArray(peak);
  out += "}\n";
  return out;
}

}  // namespace pipeplan::app
