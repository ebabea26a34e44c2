#include "comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "format.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/simulator.h"
#include "pipeplan/planner/strategy.h"

namespace pipeplan::cli {
namespace {

CostModel ScaleCompute(CostModel costs, int stages_per_rank) {
  if (stages_per_rank <= 1) return costs;
  const double factor = 1.0 / stages_per_rank;
  for (StageCosts& stage : costs.stages) {
    stage.forward *= factor;
    stage.backward *= factor;
    stage.backward_input *= factor;
    stage.backward_weight *= factor;
    stage.overlap *= factor;
  }
  return costs;
}

ComparisonRow RunOne(const Strategy& strategy, const PlanRequest& base, int multi_stage_v) {
  ComparisonRow row;
  row.strategy = std::string(strategy.name);
  row.stages_per_rank = strategy.min_stages_per_rank <= 1 ? 1 : multi_stage_v;

  PlanRequest request = base;
  request.strategy = row.strategy;
  request.topology.stages_per_rank = row.stages_per_rank;
  request.topology.placement = strategy.placement;
  // Loop and V placements split a rank's share of the model into V stages; dual placement
  // (DualPipe) holds one full share of each of two model copies, so its stages keep the cost.
  const bool split_share = strategy.placement != Placement::kDual;
  request.costs = split_share ? ScaleCompute(base.costs, row.stages_per_rank) : base.costs;
  // The microbatch group size is an interleaved-1f1b option; the planner rejects it elsewhere.
  if (strategy.name != "interleaved-1f1b") request.options.microbatch_group_size = 0;
  if (Status status = CheckApplicable(strategy, request.topology); !status.ok()) {
    row.error = status.message();
    return row;
  }
  StatusOr<Plan> plan = BuildPlan(request);
  if (!plan.ok()) {
    row.error = plan.status().message();
    return row;
  }
  StatusOr<Timeline> timeline = Simulate(*plan);
  if (!timeline.ok()) {
    row.error = timeline.status().message();
    return row;
  }
  row.plan = *std::move(plan);
  row.timeline = *std::move(timeline);
  return row;
}

double PeakActivation(const Timeline& timeline) {
  double peak = 0;
  for (const RankTimeline& rank : timeline.ranks)
    peak = std::max(peak, rank.peak_activation_memory);
  return peak;
}

}  // namespace

std::vector<ComparisonRow> RunComparison(const PlanRequest& base, int multi_stage_v) {
  std::vector<ComparisonRow> rows;
  for (const Strategy& strategy : AllStrategies())
    rows.push_back(RunOne(strategy, base, multi_stage_v));
  double best = std::numeric_limits<double>::infinity();
  for (const ComparisonRow& row : rows) {
    if (row.timeline.has_value()) best = std::min(best, row.timeline->metrics.makespan);
  }
  for (ComparisonRow& row : rows) {
    // Equal up to rounding noise from the 1/V scaling.
    row.best =
        row.timeline.has_value() && row.timeline->metrics.makespan <= best * (1 + 1e-12) + 1e-12;
  }
  return rows;
}

std::string RenderComparisonTable(const std::vector<ComparisonRow>& rows) {
  TextTable table({"", "strategy", "V", "makespan", "zb_bubble_rate", "bubble max", "bubble mean",
                   "peak act. mem", "gap to LB"},
                  {true, true});
  for (const ComparisonRow& row : rows) {
    const std::string mark = row.best ? "*" : "";
    const std::string v = std::to_string(row.stages_per_rank);
    if (!row.timeline.has_value()) {
      table.AddSpanRow({mark, row.strategy, v}, "failed: " + row.error);
      continue;
    }
    const Metrics& m = row.timeline->metrics;
    table.AddRow(
        {mark, row.strategy, v, FormatCompact(m.makespan), FormatFixed(m.zb_bubble_rate, 4),
         FormatFixed(m.bubble_fraction_max, 4), FormatFixed(m.bubble_fraction_mean, 4),
         FormatCompact(PeakActivation(*row.timeline)), FormatPercent(m.gap_to_lower_bound)});
  }
  return table.Render() + "(* = smallest makespan)\n";
}

std::vector<ReportEntry> ReportEntries(const std::vector<ComparisonRow>& rows) {
  std::vector<ReportEntry> entries;
  for (const ComparisonRow& row : rows) {
    if (!row.plan.has_value() || !row.timeline.has_value()) continue;
    std::string name = row.strategy;
    if (row.stages_per_rank > 1) name += " (V=" + std::to_string(row.stages_per_rank) + ")";
    entries.push_back(ReportEntry{std::move(name), *row.plan, *row.timeline});
  }
  return entries;
}

std::string DescribeRequest(const PlanRequest& base) {
  const Topology& t = base.topology;
  std::string text = "P=" + std::to_string(t.ranks) + " M=" + std::to_string(t.microbatches);
  if (base.costs.stages.size() == 1) {
    const StageCosts& c = base.costs.stages.front();
    text += "; costs per rank share F=" + FormatCompact(c.forward) +
            " B=" + FormatCompact(c.backward) + " (I=" + FormatCompact(c.backward_input) +
            " W=" + FormatCompact(c.backward_weight) + ")";
  } else {
    text += "; per-stage costs";
  }
  if (base.costs.boundaries.size() == 1) {
    text += " comm=" + FormatCompact(base.costs.boundaries.front().latency);
  }
  if (base.memory.limit.has_value()) text += "; memory limit " + FormatCompact(*base.memory.limit);
  return text;
}

}  // namespace pipeplan::cli
