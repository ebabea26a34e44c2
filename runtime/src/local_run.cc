#include "pipeplan/runtime/local_run.h"

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/watchdog.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/simulation/timeline_metrics.h"

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
  if (!options.timers.empty() && options.timers.size() != ranks) {
    return InvalidArgument("the plan has " + std::to_string(ranks) + " ranks but " +
                           std::to_string(options.timers.size()) + " op timers were given");
  }
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

// One thread per rank for the whole run. With the step barrier they step in lock-step with
// the caller's thread through two barriers: `start` opens a step (and stamps its time zero),
// `finish` closes it. Without it each runs all its steps and hands each step's result to the
// caller's thread, which assembles the steps in order as their last rank hands them in.
class LocalRun {
 public:
  LocalRun(const Plan& plan, std::span<OpExecutor* const> executors,
           std::span<Transport* const> transports, const LocalRunOptions& options)
      : plan_(plan),
        executors_(executors),
        transports_(transports),
        options_(options),
        progress_(plan.programs.size()),
        results_(plan.programs.size(), Status(StatusCode::kInternal, "not run")),
        start_(static_cast<std::ptrdiff_t>(plan.programs.size() + 1), StampEpoch{&step_options_}),
        finish_(static_cast<std::ptrdiff_t>(plan.programs.size() + 1)) {
    programs_.reserve(plan.programs.size());
    for (const RankProgram& program : plan.programs) programs_.emplace_back(program);
    step_options_.seconds_per_unit = options.seconds_per_unit;
    step_options_.shared_device = options.shared_device;
  }

  StatusOr<std::vector<Timeline>> Run() {
    std::vector<WatchedRank> watched;
    for (size_t r = 0; r < programs_.size(); ++r) {
      watched.push_back({&programs_[r].program(), &progress_[r]});
    }
    const Watchdog watchdog(watched, options_.timeout_seconds, [this](const Status& stall) {
      {
        const std::lock_guard lock(stall_mutex_);
        stall_ = stall;
      }
      // The diagnosis first, so that no rank reports the stop instead of its cause.
      transports_[0]->Abort(stall);
      step_options_.stop.request_stop();
    });
    if (!options_.step_barrier) return RunWithoutBarrier();
    std::vector<std::jthread> threads;
    threads.reserve(programs_.size());
    for (size_t r = 0; r < programs_.size(); ++r) {
      threads.emplace_back([this, r] { RankLoop(r); });
    }
    StatusOr<std::vector<Timeline>> measured = RunSteps();
    quit_ = true;
    start_.arrive_and_wait();  // releases the rank threads to see `quit_` and return
    return measured;
  }

 private:
  // A rank's result of one step, and when the rank began it (seconds since the run's epoch).
  struct HandedIn {
    double start = 0.0;
    StatusOr<RankTimeline> result;
  };

  struct StampEpoch {
    StepOptions* options;
    void operator()() const noexcept { options->epoch = Clock::now(); }
  };

  void RankLoop(size_t rank) {
    while (true) {
      start_.arrive_and_wait();
      if (quit_) return;
      StepOptions mine = step_options_;
      mine.progress = &progress_[rank];
      if (!options_.timers.empty()) mine.timer = options_.timers[rank];
      StatusOr<RankTimeline> result =
          ExecuteStep(programs_[rank], *executors_[rank], *transports_[rank], mine);
      results_[rank] = std::move(result);
      finish_.arrive_and_wait();
    }
  }

  StatusOr<std::vector<Timeline>> RunSteps() {
    std::vector<Timeline> measured;
    std::optional<TimePoint> first_epoch;
    for (int step = 0; step < options_.warmup + options_.steps; ++step) {
      step_options_.step = step;
      step_options_.last_step = step + 1 == options_.warmup + options_.steps;
      const TimePoint begin = Clock::now();
      start_.arrive_and_wait();
      const TimePoint epoch = step_options_.epoch;  // stamped as the barrier let the ranks go
      if (!first_epoch.has_value()) first_epoch = epoch;
      finish_.arrive_and_wait();
      PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, Collect());
      const bool warmup = step < options_.warmup;
      if (options_.on_step) {
        const double start = SecondsBetween(*first_epoch, epoch);
        options_.on_step({step, warmup, SecondsBetween(begin, Clock::now()), start,
                          std::vector<double>(programs_.size(), start), &timeline});
      }
      if (!warmup) measured.push_back(std::move(timeline));
    }
    return measured;
  }

  StatusOr<Timeline> Collect() {
    std::vector<Status> statuses;
    statuses.reserve(results_.size());
    for (const auto& result : results_) statuses.push_back(result.status());
    {
      const std::lock_guard lock(stall_mutex_);
      PIPEPLAN_RETURN_IF_ERROR(RootCause(stall_, statuses));
    }
    Timeline timeline;
    timeline.source = TimelineSource::kMeasured;
    for (size_t r = 0; r < results_.size(); ++r) {
      timeline.ranks.push_back(std::move(results_[r]).value());
      SummarizeComputeTimes(plan_.programs[r], timeline.ranks.back());
    }
    timeline.metrics = ComputeMetrics(timeline.ranks, LowerBound(plan_, plan_.request.costs));
    return timeline;
  }

  // ---- without the step barrier ---------------------------------------------------------

  StatusOr<std::vector<Timeline>> RunWithoutBarrier() {
    const int steps = options_.warmup + options_.steps;
    handed_in_.assign(steps, std::vector<std::optional<HandedIn>>(programs_.size()));
    state_sends_.resize(programs_.size());
    step_options_.epoch = Clock::now();
    std::vector<std::jthread> threads;
    threads.reserve(programs_.size());
    for (size_t r = 0; r < programs_.size(); ++r) {
      threads.emplace_back([this, r, steps] { RankSteps(r, steps); });
    }
    return AssembleSteps(steps);
  }

  void RankSteps(size_t rank, int steps) {
    for (int step = 0; step < steps; ++step) {
      StepOptions mine = step_options_;
      mine.step = step;
      mine.last_step = step + 1 == steps;
      mine.progress = &progress_[rank];
      mine.state_sends = &state_sends_[rank];
      if (!options_.timers.empty()) mine.timer = options_.timers[rank];
      const double start = SecondsBetween(mine.epoch, Clock::now());
      StatusOr<RankTimeline> result =
          ExecuteStep(programs_[rank], *executors_[rank], *transports_[rank], mine);
      const bool failed = !result.ok();
      {
        const std::lock_guard lock(handed_in_mutex_);
        handed_in_[step][rank] = HandedIn{start, std::move(result)};
      }
      handed_in_changed_.notify_all();
      if (failed) return;
    }
  }

  // Every rank either hands in step k or fails an earlier one, which ends the run there:
  // waiting for all of step k in step order cannot hang.
  StatusOr<std::vector<Timeline>> AssembleSteps(int steps) {
    std::vector<Timeline> measured;
    double previous_end = 0.0;  // seconds since the run's epoch
    double first_start = 0.0;
    for (int step = 0; step < steps; ++step) {
      std::vector<HandedIn> ranks;
      {
        std::unique_lock lock(handed_in_mutex_);
        handed_in_changed_.wait(lock, [&] {
          return std::ranges::all_of(handed_in_[step], [](const auto& h) { return h.has_value(); });
        });
        for (std::optional<HandedIn>& h : handed_in_[step]) ranks.push_back(std::move(*h));
      }
      const double start = std::ranges::min_element(ranks, {}, &HandedIn::start)->start;
      if (step == 0) first_start = start;
      PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, AssembleStep(ranks, start));
      const double end = start + timeline.metrics.makespan * options_.seconds_per_unit;
      const bool warmup = step < options_.warmup;
      if (options_.on_step) {
        std::vector<double> rank_starts(ranks.size());
        for (size_t r = 0; r < ranks.size(); ++r) rank_starts[r] = ranks[r].start - first_start;
        options_.on_step(
            {step, warmup, end - previous_end, start - first_start, rank_starts, &timeline});
      }
      previous_end = end;
      if (!warmup) measured.push_back(std::move(timeline));
    }
    return measured;
  }

  // One step's timeline from the ranks' results (times since the run's epoch), rebased to
  // `start`, the earliest rank's start of it.
  StatusOr<Timeline> AssembleStep(std::vector<HandedIn>& ranks, double start) {
    for (size_t r = 0; r < ranks.size(); ++r) results_[r] = std::move(ranks[r].result);
    for (size_t r = 0; r < results_.size(); ++r) {
      if (results_[r].ok()) {
        ShiftRankTimeline(plan_.programs[r], start / options_.seconds_per_unit, *results_[r]);
      }
    }
    return Collect();
  }

  const Plan& plan_;
  std::span<OpExecutor* const> executors_;
  std::span<Transport* const> transports_;
  const LocalRunOptions& options_;
  std::vector<PreparedProgram> programs_;
  std::vector<RankProgress> progress_;
  // Written by the caller's thread between steps only; the barriers order it for the ranks.
  StepOptions step_options_;
  std::vector<StatusOr<RankTimeline>> results_;
  std::barrier<StampEpoch> start_;
  std::barrier<> finish_;
  bool quit_ = false;
  // Without the barrier: each step's result per rank as handed in, and each rank's
  // post-validation sends still in flight between its steps.
  std::mutex handed_in_mutex_;
  std::condition_variable handed_in_changed_;
  std::vector<std::vector<std::optional<HandedIn>>> handed_in_;
  std::vector<std::vector<std::unique_ptr<PendingOp>>> state_sends_;
  std::mutex stall_mutex_;
  std::optional<Status> stall_;
};

}  // namespace

StatusOr<std::vector<Timeline>> RunLocal(const Plan& plan, std::span<OpExecutor* const> executors,
                                         std::span<Transport* const> transports,
                                         const LocalRunOptions& options) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSetup(plan, executors.size(), transports.size(), options));
  PIPEPLAN_RETURN_IF_ERROR(CheckBeforeLaunch(plan));
  LocalRun run(plan, executors, transports, options);
  return run.Run();
}

}  // namespace pipeplan::runtime
