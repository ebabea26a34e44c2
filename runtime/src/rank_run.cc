#include "pipeplan/runtime/rank_run.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/rank_progress.h"
#include "pipeplan/runtime/watchdog.h"

namespace pipeplan::runtime {

StatusOr<std::vector<RankTimeline>> RunRank(const Plan& plan, RankId rank, OpExecutor& executor,
                                            Transport& transport, const RankRunOptions& options) {
  if (rank.value < 0 || rank.value >= static_cast<int>(plan.programs.size())) {
    return InvalidArgument("rank " + std::to_string(rank.value) + " is outside the plan's " +
                           std::to_string(plan.programs.size()) + " ranks");
  }
  if (options.steps < 1) return InvalidArgument("steps must be at least 1");
  if (options.warmup < 0) return InvalidArgument("warm-up steps must be 0 or more");
  if (!(options.timeout_seconds > 0)) return InvalidArgument("the timeout must be positive");
  if (!(options.seconds_per_unit > 0)) return InvalidArgument("the time unit must be positive");
  PIPEPLAN_RETURN_IF_ERROR(CheckBeforeLaunch(plan));

  const PreparedProgram program(plan.programs[rank.value]);
  RankProgress progress;
  StepOptions step_options;
  step_options.seconds_per_unit = options.seconds_per_unit;
  step_options.progress = &progress;
  step_options.timer = options.timer;
  std::mutex stall_mutex;
  std::optional<Status> stall;
  const Watchdog watchdog({{&program.program(), &progress}}, options.timeout_seconds,
                          [&](const Status& diagnosis) {
                            {
                              const std::lock_guard lock(stall_mutex);
                              stall = diagnosis;
                            }
                            transport.Abort(diagnosis);  // the cause before the stop
                            step_options.stop.request_stop();
                          });
  std::vector<std::unique_ptr<PendingOp>> state_sends;
  if (!options.step_barrier) step_options.state_sends = &state_sends;
  std::vector<RankTimeline> measured;
  for (int step = 0; step < options.warmup + options.steps; ++step) {
    const bool opens_together = options.step_barrier || step == 0;
    if (options.barrier && opens_together) {
      if (Status status = options.barrier(step); !status.ok()) {
        transport.Abort(status);
        return status;
      }
    }
    step_options.step = step;
    step_options.last_step = step + 1 == options.warmup + options.steps;
    if (opens_together) step_options.epoch = Clock::now();
    StatusOr<RankTimeline> timeline = ExecuteStep(program, executor, transport, step_options);
    if (!timeline.ok()) {
      const std::lock_guard lock(stall_mutex);
      return stall ? *stall : timeline.status();
    }
    if (step >= options.warmup) measured.push_back(*std::move(timeline));
  }
  return measured;
}

}  // namespace pipeplan::runtime
