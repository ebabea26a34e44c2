#include "pipeplan/torch_ext/plan_op.h"

#include <utility>
#include <vector>

#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/metrics_json.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/planner/make_plan.h"

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
          .costs_model = std::nullopt,
          .forward = request.forward,
          .backward = request.backward,
          .backward_input = request.backward_input,
          .backward_weight = request.backward_weight,
          .overlap = request.overlap,
          .comm = request.comm,
          .receive_overhead = request.receive_overhead};
}

}  // namespace

StatusOr<PlanOpResult> RunPlanOp(const PlanOpRequest& request) {
  PIPEPLAN_ASSIGN_OR_RETURN(
      const app::RequestFlags request_flags,
      app::CheckRequestValues(ValuesOf(request), app::StrategyFlag::kRequired));
  PIPEPLAN_ASSIGN_OR_RETURN(const PlanRequest plan_request, app::LoadRequest(request_flags));
  // The solver-made strategies run CP-SAT as `pipeplan plan` does.
  StatusOr<Evaluated> planned = MakePlan(plan_request, PlanOptions{.solve = app::RunCpSat});
  if (!planned.ok()) return app::InFlagTerms(planned.status(), request_flags);
  const Plan& plan = planned->plan;
  const Timeline& timeline = planned->timeline;

  PIPEPLAN_ASSIGN_OR_RETURN(TorchCsvExport exported, ExportTorchCsv(plan, request.format));
  PlanOpResult result;
  result.actions = TorchCsvRows(exported.csv);
  result.metrics_json = app::RenderMetricsJson(plan, timeline);
  if (result.metrics_json.ends_with('\n')) result.metrics_json.pop_back();
  // As `pipeplan plan` then `pipeplan export` print them: how the plan was chosen and what was
  // estimated for it, then what the export left out.
  result.notes = std::move(planned->notes);
  result.notes.insert(result.notes.end(), exported.notes.begin(), exported.notes.end());
  return result;
}

StatusOr<TorchCsvFormat> ParseTorchCsvFormat(const std::string& name) {
  if (name == "torch-csv") return TorchCsvFormat::kComputeOnly;
  if (name == "torch-csv-comms") return TorchCsvFormat::kComputeComms;
  return InvalidArgument("unknown format '" + name + "' (expected torch-csv or torch-csv-comms)");
}

}  // namespace pipeplan::torch_ext
