// What the torch benchmarks share: one rank of a one-rank plan run through the executor's own
// Run, and the median of their samples.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/torch_ext/torch_executor.h"

namespace pipeplan::torch_ext {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// A one-rank executor for `strategy` with `microbatches`, with its actions in order (all
// compute: one rank sends nothing).
struct SingleStage {
  std::unique_ptr<TorchExecutor> executor;
  std::vector<Action> compute;
};

inline StatusOr<SingleStage> MakeSingleStage(const std::string& strategy, int microbatches,
                                             const TorchExecutorOptions& options) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = 1;
  request.topology.microbatches = microbatches;
  PIPEPLAN_ASSIGN_OR_RETURN(Plan plan, BuildPlan(request));
  SingleStage single;
  PIPEPLAN_ASSIGN_OR_RETURN(single.executor, TorchExecutor::Create(plan, RankId(0), options));
  single.compute = plan.programs.front().actions;
  return single;
}

// One step of `single`, through BeginStep, Run of every action, and EndStep.
inline Status RunStep(SingleStage& single, int step) {
  runtime::OpContext context;
  context.step = step;
  PIPEPLAN_RETURN_IF_ERROR(single.executor->BeginStep(context));
  for (size_t index = 0; index < single.compute.size(); ++index) {
    context.action_index = index;
    PIPEPLAN_RETURN_IF_ERROR(single.executor->Run(single.compute[index], context));
  }
  return single.executor->EndStep(context);
}

}  // namespace pipeplan::torch_ext
