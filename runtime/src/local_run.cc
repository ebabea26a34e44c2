#include "pipeplan/runtime/local_run.h"

#include <barrier>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "pipeplan/planner/simulator.h"
#include "pipeplan/planner/timeline_metrics.h"
#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/watchdog.h"

namespace pipeplan::runtime {
namespace {

Status CheckSetup(const Plan& plan, size_t executors, size_t transports,
                  const LocalRunOptions& options) {
  const size_t ranks = plan.programs.size();
  if (executors != ranks || transports != ranks) {
    return InvalidArgument("the plan has " + std::to_string(ranks) + " ranks but " +
                           std::to_string(executors) + " executors and " +
                           std::to_string(transports) + " transports were given");
  }
  if (options.steps < 1) return InvalidArgument("steps must be at least 1");
  if (options.warmup < 0) return InvalidArgument("warm-up steps must be 0 or more");
  if (!(options.timeout_seconds > 0)) return InvalidArgument("the timeout must be positive");
  if (!(options.seconds_per_unit > 0)) return InvalidArgument("the time unit must be positive");
  return Status::Ok();
}

// The error to report for a failed step: the watchdog's diagnosis, else the first error that
// did not merely come from the abort (by rank), else any.
Status RootCause(const std::optional<Status>& stall, const std::vector<Status>& results) {
  if (stall) return *stall;
  for (const Status& status : results) {
    if (!status.ok() && status.code() != StatusCode::kAborted) return status;
  }
  for (const Status& status : results) {
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

class LocalStep {
 public:
  LocalStep(const Plan& plan, const std::vector<PreparedProgram>& programs,
            std::span<OpExecutor* const> executors, std::span<Transport* const> transports,
            const LocalRunOptions& options)
      : plan_(plan),
        programs_(programs),
        executors_(executors),
        transports_(transports),
        options_(options),
        progress_(programs.size()) {}

  StatusOr<Timeline> Run(int step) {
    const size_t ranks = programs_.size();
    std::vector<StatusOr<RankTimeline>> results(ranks, Status(StatusCode::kInternal, "not run"));
    StepOptions step_options;
    step_options.step = step;
    step_options.seconds_per_unit = options_.seconds_per_unit;
    {
      // Time zero is when every rank thread is up: the barrier's completion stamps it.
      std::barrier start(static_cast<std::ptrdiff_t>(ranks),
                         [&]() noexcept { step_options.epoch = Clock::now(); });
      const Watchdog watchdog(Watched(), options_.timeout_seconds, [&](const Status& stall) {
        {
          const std::lock_guard lock(stall_mutex_);
          stall_ = stall;
        }
        step_options.stop.request_stop();
        transports_[0]->Abort(stall);
      });
      std::vector<std::jthread> threads;
      threads.reserve(ranks);
      for (size_t r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
          start.arrive_and_wait();
          StepOptions mine = step_options;
          mine.progress = &progress_[r];
          results[r] = ExecuteStep(programs_[r], *executors_[r], *transports_[r], mine);
        });
      }
    }  // joins every rank, then stops the watchdog
    std::vector<Status> statuses;
    statuses.reserve(ranks);
    for (const auto& result : results) statuses.push_back(result.status());
    const std::lock_guard lock(stall_mutex_);
    PIPEPLAN_RETURN_IF_ERROR(RootCause(stall_, statuses));

    Timeline timeline;
    timeline.source = TimelineSource::kMeasured;
    for (size_t r = 0; r < ranks; ++r) {
      timeline.ranks.push_back(std::move(results[r]).value());
      SummarizeComputeTimes(plan_.programs[r], timeline.ranks.back());
    }
    timeline.metrics = ComputeMetrics(timeline.ranks, LowerBound(plan_, plan_.request.costs));
    return timeline;
  }

 private:
  std::vector<WatchedRank> Watched() const {
    std::vector<WatchedRank> watched;
    for (size_t r = 0; r < programs_.size(); ++r) {
      watched.push_back({&programs_[r].program(), &progress_[r]});
    }
    return watched;
  }

  const Plan& plan_;
  const std::vector<PreparedProgram>& programs_;
  std::span<OpExecutor* const> executors_;
  std::span<Transport* const> transports_;
  const LocalRunOptions& options_;
  std::vector<RankProgress> progress_;
  std::mutex stall_mutex_;
  std::optional<Status> stall_;
};

}  // namespace

StatusOr<std::vector<Timeline>> RunLocal(const Plan& plan, std::span<OpExecutor* const> executors,
                                         std::span<Transport* const> transports,
                                         const LocalRunOptions& options) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSetup(plan, executors.size(), transports.size(), options));
  PIPEPLAN_RETURN_IF_ERROR(CheckBeforeLaunch(plan));
  std::vector<PreparedProgram> programs;
  programs.reserve(plan.programs.size());
  for (const RankProgram& program : plan.programs) programs.emplace_back(program);

  std::vector<Timeline> measured;
  for (int step = 0; step < options.warmup + options.steps; ++step) {
    LocalStep runner(plan, programs, executors, transports, options);
    const TimePoint begin = Clock::now();
    PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, runner.Run(step));
    const bool warmup = step < options.warmup;
    if (options.on_step) {
      options.on_step({step, warmup, SecondsBetween(begin, Clock::now()), &timeline});
    }
    if (!warmup) measured.push_back(std::move(timeline));
  }
  return measured;
}

}  // namespace pipeplan::runtime
