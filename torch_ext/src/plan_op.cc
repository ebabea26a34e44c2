#include "pipeplan/torch_ext/plan_op.h"

#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/metrics_json.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/optimal.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan::torch_ext {
namespace {

// The op's arguments are `pipeplan plan`'s flags, typed.
app::RequestValues ValuesOf(const PlanOpRequest& request) {
  return {.request_file = std::nullopt,
          .strategy = request.strategy,
          .ranks = request.ranks,
          .microbatches = request.microbatches,
          .stages_per_rank = request.stages_per_rank,
          .microbatch_group_size = request.microbatch_group_size,
          .memory_limit = request.memory_limit,
          .post_validation = request.post_validation,
          .runtime = request.runtime,
          .costs_file = request.costs_file,
          .forward = request.forward,
          .backward = request.backward,
          .backward_input = request.backward_input,
          .backward_weight = request.backward_weight,
          .overlap = request.overlap,
          .comm = request.comm,
          .receive_overhead = request.receive_overhead};
}

// The cells of each "\r\n"-ended row; our tokens never hold ',' (torch_csv_export.cc).
std::vector<std::vector<std::string>> SplitRows(std::string_view csv) {
  std::vector<std::vector<std::string>> rows;
  constexpr std::string_view kRowEnd = "\r\n";
  while (!csv.empty()) {
    const size_t end = csv.find(kRowEnd);
    std::string_view row = csv.substr(0, end);
    std::vector<std::string>& cells = rows.emplace_back();
    while (!row.empty()) {
      const size_t comma = row.find(',');
      cells.emplace_back(row.substr(0, comma));
      row.remove_prefix(comma == std::string_view::npos ? row.size() : comma + 1);
    }
    csv.remove_prefix(end == std::string_view::npos ? csv.size() : end + kRowEnd.size());
  }
  return rows;
}

// The plan, its timeline and its notes; for auto, also what its pick rests on
// (AutoResult::notes). The solver-made strategies run CP-SAT as `pipeplan plan` does.
StatusOr<Evaluated> PlanAndSimulate(const PlanRequest& request, std::vector<std::string>& notes) {
  if (FindOptimalStrategy(request.strategy) != nullptr) {
    PIPEPLAN_ASSIGN_OR_RETURN(OptimalPlan made,
                              BuildOptimalPlan(request, OptimalOptions{}, app::RunCpSat));
    notes.push_back(request.strategy + ": " + made.plan.provenance.solver_status);
    return Evaluated{std::move(made.plan), std::move(made.timeline), std::move(made.notes)};
  }
  if (request.strategy != kAutoStrategy) return BuildAndSimulatePlan(request);
  PIPEPLAN_ASSIGN_OR_RETURN(AutoResult result, AutoSearch(request));
  notes = std::move(result.notes);
  return std::move(result.best);
}

}  // namespace

StatusOr<PlanOpResult> RunPlanOp(const PlanOpRequest& request) {
  PIPEPLAN_ASSIGN_OR_RETURN(
      const app::RequestFlags request_flags,
      app::CheckRequestValues(ValuesOf(request), app::StrategyFlag::kRequired));
  PIPEPLAN_ASSIGN_OR_RETURN(const PlanRequest plan_request, app::LoadRequest(request_flags));
  std::vector<std::string> auto_notes;
  StatusOr<Evaluated> planned = PlanAndSimulate(plan_request, auto_notes);
  if (!planned.ok()) return app::InFlagTerms(planned.status(), request_flags);
  const Plan& plan = planned->plan;
  const Timeline& timeline = planned->timeline;

  PIPEPLAN_ASSIGN_OR_RETURN(TorchCsvExport exported, ExportTorchCsv(plan, request.format));
  PlanOpResult result;
  result.actions = SplitRows(exported.csv);
  result.metrics_json = app::RenderMetricsJson(plan, timeline);
  if (result.metrics_json.ends_with('\n')) result.metrics_json.pop_back();
  result.notes = std::move(exported.notes);
  result.notes.insert(result.notes.end(), auto_notes.begin(), auto_notes.end());
  result.notes.insert(result.notes.end(), planned->notes.begin(), planned->notes.end());
  return result;
}

StatusOr<TorchCsvFormat> ParseTorchCsvFormat(const std::string& name) {
  if (name == "torch-csv") return TorchCsvFormat::kComputeOnly;
  if (name == "torch-csv-comms") return TorchCsvFormat::kComputeComms;
  return InvalidArgument("unknown format '" + name + "' (expected torch-csv or torch-csv-comms)");
}

}  // namespace pipeplan::torch_ext
