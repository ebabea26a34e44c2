#include "pipeplan/runtime/rank_session.h"

#include <string>
#include <utility>

#include "pipeplan/runtime/timeline_exchange.h"

namespace pipeplan::runtime {
namespace {

StatusOr<GatheredSteps> Gather(Coordinator& coordinator, const Plan& plan,
                               const RankSessionOptions& options) {
  GatheredSteps gathered;
  const bool from_run_start = !options.run.step_barrier;
  PIPEPLAN_ASSIGN_OR_RETURN(gathered.steps,
                            GatherTimelines(coordinator, plan, options.run.steps, options.timeout,
                                            from_run_start ? &gathered.added : nullptr,
                                            from_run_start ? &gathered.starts : nullptr));
  return gathered;
}

}  // namespace

Status RunRankSession(const Plan& plan, RankId rank, OpExecutor& executor,
                      std::unique_ptr<Transport> transport, std::unique_ptr<OpTimer> timer,
                      Coordinator& coordinator, RankSessionOptions options) {
  RankRunOptions run = options.run;
  run.timer = timer.get();
  run.barrier = [&coordinator, &options](int step) {
    return coordinator.Barrier("step-" + std::to_string(step), options.timeout);
  };
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<RankTimeline> mine,
                            RunRank(plan, rank, executor, *transport, run));
  // The steps are done: stop the transport's watch on the store now, so that no rank still
  // polls it when rank 0 (which may host it) leaves.
  timer.reset();
  transport.reset();
  PIPEPLAN_RETURN_IF_ERROR(PublishTimelines(coordinator, rank, std::move(mine)));
  if (options.publish) PIPEPLAN_RETURN_IF_ERROR(options.publish(coordinator));
  Status reported = Status::Ok();
  if (rank.value == 0) {
    StatusOr<GatheredSteps> gathered = Gather(coordinator, plan, options);
    reported = gathered.status();
    if (gathered.ok() && options.report) reported = options.report(coordinator, *gathered);
  }
  PIPEPLAN_RETURN_IF_ERROR(
      LeaveTogether(coordinator, rank.value, options.world_size, options.timeout));
  return reported;
}

}  // namespace pipeplan::runtime
