#include "pipeplan/cli/comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeplan/app/format.h"
#include "pipeplan/app/plan_summary.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/model/figure_sources.h"
#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/runtime_target.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/runtime_support.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::cli {
namespace {

ComparisonRow RunOne(const Strategy& strategy, const PlanRequest& base, int multi_stage_v) {
  ComparisonRow row;
  row.strategy = std::string(strategy.name);
  row.stages_per_rank = strategy.min_stages_per_rank <= 1 ? 1 : multi_stage_v;
  PlanRequest request = ShareAtStages(base, strategy.name, strategy.placement, row.stages_per_rank);
  // The microbatch group size is an interleaved-1f1b option; the planner rejects it elsewhere.
  if (strategy.setting != StrategySetting::kGroupSizes) request.options.microbatch_group_size = 0;
  row.request = request;
  if (Status status = CheckApplicable(strategy, request.topology); !status.ok()) {
    row.error = status.message();
    return row;
  }
  StatusOr<Evaluated> planned = MakePlan(request, PlanOptions{});
  if (!planned.ok()) {
    row.error = planned.status().message();
    return row;
  }
  row.assumes = DescribeAssumptions(planned->plan, base.costs, base.memory);
  if (IsTorchScheduleRuntime(base.runtime)) row.torch = SimulateTorchExports(planned->plan);
  row.made = *std::move(planned);
  return row;
}

// The limit a candidate orders under, "12" or "2.49 GiB" in its memory model's unit; "none":
// the strategy's default.
std::string OrderLimitText(const PlanRequest& request) {
  const double order = *request.options.order_limit;
  return std::isinf(order) ? "none" : app::FormatMemory(order, request.memory);
}

// "group=8" for interleaved-1f1b, "order<=12" for the limit zb's memory steps and the raised
// limits order under; what else tells two candidates of one strategy and V apart.
std::string CandidateSetting(const PlanRequest& request) {
  if (request.options.microbatch_group_size > 0) {
    return "group=" + std::to_string(request.options.microbatch_group_size);
  }
  if (request.options.order_limit.has_value()) return "order<=" + OrderLimitText(request);
  return "";
}

// Two auto candidates of one strategy and V that differ at most in the limit they order under.
bool SameButOrderLimit(const PlanRequest& a, const PlanRequest& b) {
  return a.strategy == b.strategy && a.topology == b.topology &&
         a.options.order_limit.has_value() && b.options.order_limit.has_value();
}

ComparisonRow RunSolverMade(const OptimalStrategy& strategy, int stages_per_rank,
                            const PlanRequest& base, const PlanOptions& optimal) {
  ComparisonRow row;
  row.strategy = std::string(strategy.name);
  row.stages_per_rank = stages_per_rank;
  row.solver_made = true;
  PlanRequest request = ShareAtStages(base, strategy.name, strategy.placement, stages_per_rank);
  request.options.microbatch_group_size = 0;
  row.request = request;
  StatusOr<Evaluated> planned = MakePlan(request, optimal);
  if (!planned.ok()) {
    row.error = planned.status().message();
    return row;
  }
  row.made = *std::move(planned);
  return row;
}

// optimal at V = 1 and at `multi_stage_v` (loop), optimal-v at V = 2.
void AddSolverMadeRows(const PlanRequest& base, int multi_stage_v, const PlanOptions& optimal,
                       std::vector<ComparisonRow>& rows) {
  for (const OptimalStrategy& strategy : OptimalStrategies()) {
    if (!strategy.split_backward) continue;  // optimal-fb answers another question
    std::vector<int> vs = {std::max(1, strategy.min_stages_per_rank)};
    if (strategy.max_stages_per_rank == 0 && multi_stage_v > vs.front()) {
      vs.push_back(multi_stage_v);
    }
    for (const int v : vs) rows.push_back(RunSolverMade(strategy, v, base, optimal));
  }
}

// Each catalogue row's gap to the solver-made row of the same placement and V.
void SetGapsToOptimal(std::vector<ComparisonRow>& rows) {
  for (ComparisonRow& row : rows) {
    if (row.solver_made || !row.made.has_value()) continue;
    const Topology& t = row.made->plan.request.topology;
    for (const ComparisonRow& solved : rows) {
      if (!solved.solver_made || !solved.made.has_value()) continue;
      const Topology& s = solved.made->plan.request.topology;
      if (s.placement != t.placement || s.stages_per_rank != t.stages_per_rank) continue;
      row.gap_to_optimal =
          row.made->timeline.metrics.makespan / solved.made->timeline.metrics.makespan - 1.0;
    }
  }
}

// The solver's verdict, short: "optimal", or "<= 2.31%" (at most that far above the optimum,
// by the proven bound), "periodic" (a steady state repeated: no bound), or "not proven".
std::string VerdictCell(const ComparisonRow& row) {
  const Provenance& p = row.made->plan.provenance;
  if (p.solver_status == "optimal") return "optimal";
  if (p.solver_status.rfind("periodic", 0) == 0) return "periodic";
  if (p.proven_bound <= 0) return "not proven";
  return "<= " + app::FormatPercent(row.made->timeline.metrics.makespan / p.proven_bound - 1.0);
}

}  // namespace

StatusOr<ComparisonRequest> LoadComparisonRequest(const app::RequestFlags& flags) {
  PIPEPLAN_ASSIGN_OR_RETURN(PlanRequest base, app::LoadRequest(flags));
  int multi_stage_v = flags.stages_per_rank.value_or(2);
  if (flags.request_file.has_value()) multi_stage_v = std::max(2, base.topology.stages_per_rank);
  // compare's figures are one rank's share, whatever V a request file names.
  base.topology.stages_per_rank = 1;
  base.figures = FigureScope::kRankShare;
  // A P or M no strategy plans is the request's error, not every row's.
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(base.topology));
  return ComparisonRequest{.base = std::move(base), .multi_stage_v = multi_stage_v};
}

std::vector<ComparisonRow> RunComparison(const PlanRequest& base, int multi_stage_v,
                                         const PlanOptions* optimal) {
  const PlanRequest share = MakeRankShare(base);
  std::vector<ComparisonRow> rows;
  for (const Strategy* strategy : CandidateStrategies(share)) {
    rows.push_back(RunOne(*strategy, share, multi_stage_v));
  }
  if (optimal != nullptr && !share.options.post_validation) {
    AddSolverMadeRows(share, multi_stage_v, *optimal, rows);
    SetGapsToOptimal(rows);
  }
  double best = std::numeric_limits<double>::infinity();
  for (const ComparisonRow& row : rows) {
    if (row.made.has_value()) best = std::min(best, row.made->timeline.metrics.makespan);
  }
  for (ComparisonRow& row : rows) {
    // Equal up to rounding noise from the 1/V scaling.
    row.best =
        row.made.has_value() && row.made->timeline.metrics.makespan <= best * (1 + 1e-12) + 1e-12;
  }
  return rows;
}

std::string RenderComparisonTable(const std::vector<ComparisonRow>& rows) {
  // With post-validation the rollback receives get a column of their own.
  const bool with_pv = std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& row) {
    return row.made.has_value() && app::SummarizePostValidation(row.made->plan).ranks_with_pv > 0;
  });
  std::vector<std::string> header = {"",
                                     "strategy",
                                     "V",
                                     "makespan",
                                     "zb_bubble_rate",
                                     "bubble max",
                                     "bubble mean",
                                     "peak act. mem",
                                     "gap to LB"};
  const bool with_torch = std::any_of(
      rows.begin(), rows.end(), [](const ComparisonRow& row) { return row.torch.has_value(); });
  if (with_torch) {
    header.insert(header.begin() + 4, {"torch: csv-comms", "torch: csv"});
  }
  if (with_pv) header.emplace_back("rollback RECVs");
  const bool with_optimal = std::any_of(rows.begin(), rows.end(),
                                        [](const ComparisonRow& row) { return row.solver_made; });
  if (with_optimal) header.emplace_back("gap to optimal");
  const bool with_assumed = std::any_of(
      rows.begin(), rows.end(), [](const ComparisonRow& row) { return !row.assumes.empty(); });
  if (with_assumed) header.emplace_back("assumes");
  app::TextTable table(header, {true, true});
  for (const ComparisonRow& row : rows) {
    const std::string mark = row.best ? "*" : "";
    const std::string v = std::to_string(row.stages_per_rank);
    if (!row.made.has_value()) {
      table.AddSpanRow({mark, row.strategy, v}, "failed: " + row.error);
      continue;
    }
    const Metrics& m = row.made->timeline.metrics;
    std::vector<std::string> cells = {
        mark,
        row.strategy,
        v,
        app::FormatCompact(m.makespan),
        FormatFixed(m.zb_bubble_rate, 4),
        FormatFixed(m.bubble_fraction_max, 4),
        FormatFixed(m.bubble_fraction_mean, 4),
        app::FormatMemory(PeakActivationMemory(row.made->timeline), row.made->plan.request.memory),
        app::FormatPercent(m.gap_to_lower_bound)};
    if (with_torch) {
      const bool has = row.torch.has_value();
      cells.insert(cells.begin() + 4, {has ? row.torch->plan_transfers.Cell() : "-",
                                       has ? row.torch->torch_lowering.Cell() : "-"});
    }
    if (with_pv) cells.push_back(std::to_string(CountRollbackReceives(row.made->plan)));
    if (with_optimal) {
      cells.push_back(row.solver_made                  ? VerdictCell(row)
                      : row.gap_to_optimal.has_value() ? app::FormatPercent(*row.gap_to_optimal)
                                                       : "-");
    }
    if (with_assumed) cells.push_back(row.assumes.empty() ? "-" : row.assumes);
    table.AddRow(std::move(cells));
  }
  std::string out = table.Render() + "(* = smallest makespan)\n";
  if (with_torch) {
    out +=
        "(torch: the step on torch's runtime, one comm stream per rank, loaded from the\n"
        " torch-csv-comms export (pipeplan's transfers) or torch-csv (torch adds its own, as its\n"
        " schedule classes do); '-': torch cannot run it ('pipeplan simulate PLAN --runtime\n"
        " torch' says why); makespan: pipeplan's runtime)\n";
  }
  if (with_assumed) {
    out +=
        "(assumes: what a row's makespan rests on that no profiled run measured: profile\n"
        " that plan in your runtime and calibrate its profile with yours, or on its own for\n"
        " figures cut by depth, to measure it; with B alone given, I + W = B is assumed:\n"
        " give I and W as measured)\n";
  }
  return out;
}

StatusOr<AutoResult> RunAuto(const PlanRequest& base, const std::vector<ComparisonRow>& rows) {
  PlanRequest request = MakeRankShare(base);
  request.strategy = std::string(kAutoStrategy);
  request.options.microbatch_group_size = 0;
  std::vector<PlannedRequest> planned;
  for (const ComparisonRow& row : rows) {
    if (row.made.has_value() && !row.solver_made) planned.push_back({&row.request, &*row.made});
  }
  return AutoSearch(request, planned);
}

std::string RenderAutoPick(const StatusOr<AutoResult>& result) {
  if (!result.ok()) return "auto: failed: " + result.status().message() + "\n";
  const PlanRequest& best = result->best.plan.request;
  const AutoCandidate& first = result->candidates[result->pick];
  int planned = 0;
  for (const AutoCandidate& candidate : result->candidates)
    planned += candidate.status.ok() ? 1 : 0;
  const int failed = static_cast<int>(result->candidates.size()) - planned;
  std::string out =
      "auto picks " + best.strategy + " (V=" + std::to_string(best.topology.stages_per_rank);
  if (const std::string setting = CandidateSetting(best); !setting.empty()) out += ", " + setting;
  out += "): makespan " + app::FormatCompact(first.makespan) + ", peak memory " +
         app::FormatMemory(first.peak_memory, best.memory) + "; the fastest of " +
         std::to_string(result->candidates.size()) + " candidates (" + std::to_string(planned) +
         " planned, " + std::to_string(failed) + " failed)";
  out += result->pick == 0 ? "\n" : " whose step rests on no assumed figure\n";
  for (const std::string& note : result->notes) out += "note: " + note + "\n";
  return out;
}

std::string RenderAutoSection(const StatusOr<AutoResult>& result) {
  std::string out = RenderAutoPick(result);
  if (!result.ok()) return out;
  const bool with_assumed =
      std::any_of(result->candidates.begin(), result->candidates.end(),
                  [](const AutoCandidate& candidate) { return !candidate.assumes.empty(); });
  std::vector<std::string> header = {"#", "strategy", "V", "setting", "makespan", "peak memory"};
  if (with_assumed) header.emplace_back("assumes");
  app::TextTable table(header, {false, true, true, true});
  int rank = 0;
  const std::vector<AutoCandidate>& candidates = result->candidates;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const AutoCandidate& candidate = candidates[i];
    const PlanRequest& r = candidate.request;
    const std::string v = std::to_string(r.topology.stages_per_rank);
    if (!candidate.status.ok()) {
      // The order limits of one strategy and V that failed (most: raised above the asked limit)
      // share a row: their range, and the reason at the lowest.
      size_t last = i;
      while (last + 1 < candidates.size() && !candidates[last + 1].status.ok() &&
             SameButOrderLimit(candidates[last + 1].request, r)) {
        ++last;
      }
      if (last == i) {
        table.AddSpanRow({"-", r.strategy, v, CandidateSetting(r)},
                         "failed: " + candidate.status.message());
        continue;
      }
      table.AddSpanRow({"-", r.strategy, v,
                        CandidateSetting(r) + ".." + OrderLimitText(candidates[last].request)},
                       "failed at each of " + std::to_string(last - i + 1) +
                           "; at the lowest: " + candidate.status.message());
      i = last;
      continue;
    }
    std::vector<std::string> cells = {std::to_string(++rank),
                                      r.strategy,
                                      v,
                                      CandidateSetting(r),
                                      app::FormatCompact(candidate.makespan),
                                      app::FormatMemory(candidate.peak_memory, r.memory)};
    if (with_assumed) cells.push_back(candidate.assumes.empty() ? "-" : candidate.assumes);
    table.AddRow(std::move(cells));
  }
  return out + "\n" + table.Render() +
         "(fastest first, ties: less memory; setting: interleaved-1f1b group size, or the memory\n"
         " limit a zero-bubble greedy orders under, its plan checked against the asked one; peak\n"
         " memory: static + activations, max over ranks)\n";
}

ReportEntry AutoReportEntry(const AutoResult& result) {
  const Plan& best = result.best.plan;
  // The provenance reads "auto -> NAME"; V and the setting are in the table and the section.
  std::string name = best.provenance.strategy.empty() ? "auto -> " + best.request.strategy
                                                      : best.provenance.strategy;
  return ReportEntry{std::move(name), best, result.best.timeline};
}

std::string ReportSubtitle(const std::string& description, const std::vector<ComparisonRow>& rows,
                           const std::vector<ReportEntry>& entries) {
  std::string subtitle = description;
  std::string rollbacks;
  for (const ReportEntry& entry : entries) {
    if (app::SummarizePostValidation(entry.plan).ranks_with_pv == 0) continue;
    rollbacks += rollbacks.empty() ? "" : ", ";
    rollbacks += entry.name + " " + std::to_string(CountRollbackReceives(entry.plan));
  }
  if (!rollbacks.empty()) {
    subtitle += ". Post-validation: PV on every rank; receives tagged rollback: " + rollbacks;
  }
  std::string failed;
  for (const ComparisonRow& row : rows) {
    if (row.made.has_value()) continue;
    failed += failed.empty() ? "" : "; ";
    failed += row.strategy + " (" + row.error + ")";
  }
  if (!failed.empty()) subtitle += ". Could not plan: " + failed;
  return subtitle;
}

std::vector<ReportEntry> ReportEntries(const std::vector<ComparisonRow>& rows) {
  std::vector<ReportEntry> entries;
  for (const ComparisonRow& row : rows) {
    if (!row.made.has_value()) continue;
    // V has a column of its own; short names keep the report's table within the page.
    entries.push_back(ReportEntry{row.strategy, row.made->plan, row.made->timeline});
  }
  return entries;
}

std::string DescribeRequest(const PlanRequest& base) {
  const Topology& t = base.topology;
  std::string text = "P=" + std::to_string(t.ranks) + " M=" + std::to_string(t.microbatches);
  if (base.costs.stages.size() == 1) {
    const StageCosts& c = base.costs.stages.front();
    text += "; costs per rank share F=" + app::FormatCompact(c.forward) +
            " B=" + app::FormatCompact(c.backward) + " (I=" + app::FormatCompact(c.backward_input) +
            " W=" + app::FormatCompact(c.backward_weight) + ")";
    if (c.overlap > 0) text += " overlap=" + app::FormatCompact(c.overlap);
  } else {
    text += "; per-stage costs";
  }
  if (base.costs.boundaries.size() == 1) {
    const BoundaryCosts& boundary = base.costs.boundaries.front();
    text += " comm=" + app::FormatCompact(boundary.latency);
    if (boundary.receive_overhead > 0) {
      text += " receive-overhead=" + app::FormatCompact(boundary.receive_overhead);
    }
  }
  if (base.memory.limit.has_value())
    text += "; memory limit " + app::FormatMemory(*base.memory.limit, base.memory);
  if (base.options.post_validation) text += "; post-validation (zero-bubble family only)";
  if (base.runtime != Runtime::kAny) {
    text += "; runtime " + std::string(RuntimeName(base.runtime)) + " (what it runs only)";
  }
  return text;
}

}  // namespace pipeplan::cli
