// The executor's measuring seams. The op timer: the runtime marks every op for the timer in
// program order, the timeline takes the timer's spans and names its clock, and a timer's error
// fails the step where it happened; the host timer (the default) is checked for order, not
// for durations. The op memory: what the executor measured around its computes becomes the
// timeline's memory in bytes, transfers holding what the rank held when they were reached.

#include "pipeplan/runtime/op_timer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

// Computes nothing; every message is 8 bytes.
class NullExecutor final : public OpExecutor {
 public:
  Status BeginStep(const OpContext& /*context*/) override { return Status::Ok(); }
  Status Run(const Action& /*action*/, const OpContext& /*context*/) override {
    return Status::Ok();
  }
  StatusOr<std::span<std::byte>> SendBuffer(const Action& /*send*/,
                                            const OpContext& context) override {
    return Buffer(context.action_index);
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& /*recv*/,
                                            const OpContext& context) override {
    return Buffer(context.action_index);
  }
  Status EndStep(const OpContext& /*context*/) override { return Status::Ok(); }

 private:
  std::span<std::byte> Buffer(size_t index) {
    std::vector<std::byte>& buffer = buffers_[index];
    buffer.resize(8);
    return buffer;
  }
  std::map<size_t, std::vector<std::byte>> buffers_;
};

// Reports for compute action i: 1000 i bytes at its start, 1000 i + 400 at its end, a peak of
// 1000 i + 700 in between.
class MeteredExecutor final : public OpExecutor, public OpMeter {
 public:
  Status BeginStep(const OpContext& context) override { return null_.BeginStep(context); }
  Status Run(const Action& action, const OpContext& context) override {
    const auto i = static_cast<double>(context.action_index);
    measured_.push_back({context.action_index, {1000 * i, 1000 * i + 400, 1000 * i + 700}});
    return null_.Run(action, context);
  }
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override {
    return null_.SendBuffer(send, context);
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return null_.RecvBuffer(recv, context);
  }
  Status EndStep(const OpContext& context) override { return null_.EndStep(context); }
  OpMeter* meter() override { return this; }
  std::vector<OpMemory> TakeOpMemory() override { return std::exchange(measured_, {}); }

 private:
  NullExecutor null_;
  std::vector<OpMemory> measured_;
};

// Logs every call; resolves op i to [i ms, i ms + 0.5 ms] after `epoch` on its thread.
class RecordingTimer final : public OpTimer {
 public:
  explicit RecordingTimer(TimePoint epoch, std::optional<size_t> fail_at = std::nullopt)
      : epoch_(epoch), fail_at_(fail_at) {}

  OpClock clock() const override { return OpClock::kCudaEvents; }
  Status BeginStep(size_t actions) override {
    return Log("begin " + std::to_string(actions), std::nullopt, kComputeThread);
  }
  Status ComputeBegins(size_t index) override {
    return Log("compute+ " + std::to_string(index), index, kComputeThread);
  }
  Status ComputeEnded(size_t index) override {
    return Log("compute- " + std::to_string(index), std::nullopt, kComputeThread);
  }
  Status GroupPosting(size_t begin, size_t end) override {
    return Log("posting " + std::to_string(begin) + " " + std::to_string(end), std::nullopt,
               kCommThread);
  }
  Status GroupPosted(size_t begin, size_t end) override {
    for (size_t i = begin; i < end; ++i) marked_[i] = kCommThread;
    return Log("posted " + std::to_string(begin) + " " + std::to_string(end), std::nullopt,
               kCommThread);
  }
  void Landed(size_t index, TimePoint /*completed*/) override {
    log_.push_back("landed " + std::to_string(index));
  }
  StatusOr<std::vector<OpSpan>> Resolve() override {
    std::vector<OpSpan> spans;
    for (const auto& [index, thread] : marked_) {
      const double ms = static_cast<double>(index);
      spans.push_back({index, AfterSeconds(epoch_, ms * 1e-3),
                       AfterSeconds(epoch_, (ms + 0.5) * 1e-3), thread});
    }
    return spans;
  }

  const std::vector<std::string>& log() const { return log_; }

 private:
  Status Log(std::string entry, std::optional<size_t> compute, int /*thread*/) {
    log_.push_back(std::move(entry));
    if (compute) {
      marked_[*compute] = kComputeThread;
      if (compute == fail_at_) return Internal("cudaEventRecord: an illegal memory access");
    }
    return Status::Ok();
  }

  TimePoint epoch_;
  std::optional<size_t> fail_at_;
  std::vector<std::string> log_;
  std::map<size_t, int> marked_;  // action index -> thread
};

Plan TwoRankPlan() {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 3;
  return testing::BuildOrFail(request);
}

// Runs one step of every rank of `plan`, rank r timed by timers[r] (null: the default).
template <typename Executor = NullExecutor>
std::vector<StatusOr<RankTimeline>> RunStep(const Plan& plan, std::vector<OpTimer*> timers,
                                            TimePoint epoch) {
  const int ranks = static_cast<int>(plan.programs.size());
  std::vector<std::unique_ptr<Transport>> transports = MakeInProcTransports(ranks);
  std::vector<Executor> executors(ranks);
  std::vector<PreparedProgram> programs;
  std::vector<StepOptions> options(ranks);
  for (int r = 0; r < ranks; ++r) {
    programs.emplace_back(plan.programs[r]);
    options[r].epoch = epoch;
    options[r].seconds_per_unit = 1e-3;
    options[r].timer = timers[r];
  }
  std::vector<StatusOr<RankTimeline>> results(ranks, Internal("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      results[r] = ExecuteStep(programs[r], executors[r], *transports[r], options[r]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// What the contract says rank `program` must see, in order (the landings checked apart).
std::vector<std::string> ExpectedMarks(const RankProgram& program) {
  std::vector<std::string> expected = {"begin " + std::to_string(program.actions.size())};
  for (size_t i = 0; i < program.actions.size();) {
    if (!IsComm(program.actions[i].kind)) {
      expected.push_back("compute+ " + std::to_string(i));
      expected.push_back("compute- " + std::to_string(i));
      ++i;
      continue;
    }
    size_t end = i;
    while (end < program.actions.size() && IsComm(program.actions[end].kind)) ++end;
    expected.push_back("posting " + std::to_string(i) + " " + std::to_string(end));
    expected.push_back("posted " + std::to_string(i) + " " + std::to_string(end));
    i = end;
  }
  return expected;
}

TEST(OpTimerSeam, EveryOpIsMarkedInProgramOrderAndTheTimelineTakesTheTimersSpans) {
  const Plan plan = TwoRankPlan();
  ASSERT_EQ(plan.programs.size(), 2u);
  const TimePoint epoch = Clock::now();
  RecordingTimer zero(epoch);
  RecordingTimer one(epoch);
  const std::vector<StatusOr<RankTimeline>> results = RunStep(plan, {&zero, &one}, epoch);
  const RecordingTimer* timers[] = {&zero, &one};
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(results[r].ok()) << results[r].status().message();
    const RankProgram& program = plan.programs[r];
    std::vector<std::string> marks;
    std::map<size_t, int> landed;
    for (const std::string& entry : timers[r]->log()) {
      if (entry.starts_with("landed ")) {
        ++landed[std::stoul(entry.substr(7))];
      } else {
        marks.push_back(entry);
      }
    }
    EXPECT_EQ(marks, ExpectedMarks(program));
    const RankTimeline& timeline = *results[r];
    EXPECT_EQ(timeline.clock, OpClock::kCudaEvents);
    ASSERT_EQ(timeline.actions.size(), program.actions.size());
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const bool comm = IsComm(program.actions[i].kind);
      EXPECT_EQ(landed[i], comm ? 1 : 0) << "action " << i;
      EXPECT_NEAR(timeline.actions[i].start, static_cast<double>(i), 1e-9) << "action " << i;
      EXPECT_NEAR(timeline.actions[i].end, static_cast<double>(i) + 0.5, 1e-9) << "action " << i;
      EXPECT_EQ(timeline.actions[i].thread, comm ? kCommThread : kComputeThread) << "action " << i;
    }
  }
}

TEST(OpTimerSeam, ATimerErrorFailsTheStepNamingTheRankAndAction) {
  const Plan plan = TwoRankPlan();
  ASSERT_EQ(plan.programs.size(), 2u);
  const RankProgram& program = plan.programs[0];
  size_t compute = 0;
  while (IsComm(program.actions[compute].kind)) ++compute;
  const TimePoint epoch = Clock::now();
  RecordingTimer failing(epoch, compute);
  const std::vector<StatusOr<RankTimeline>> results = RunStep(plan, {&failing, nullptr}, epoch);
  ASSERT_FALSE(results[0].ok());
  EXPECT_EQ(results[0].status().message(), Where(0, compute, program.actions[compute]) +
                                               ": cudaEventRecord: an illegal memory access");
  // The other rank learns of it through the transport's abort and stops.
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].status().message().find("cudaEventRecord"), std::string::npos)
      << results[1].status().message();
}

TEST(HostOpTimer, TheDefaultSaysHostAndItsSpansFollowTheProgram) {
  const Plan plan = TwoRankPlan();
  ASSERT_EQ(plan.programs.size(), 2u);
  const std::vector<StatusOr<RankTimeline>> results =
      RunStep(plan, {nullptr, nullptr}, Clock::now());
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].status().message();
    const RankTimeline& timeline = *results[r];
    EXPECT_EQ(timeline.clock, OpClock::kHost);
    double previous_end = 0;
    for (size_t i = 0; i < timeline.actions.size(); ++i) {
      const ActionTiming& timing = timeline.actions[i];
      EXPECT_GE(timing.start, 0.0) << "action " << i;
      EXPECT_LE(timing.start, timing.end) << "action " << i;
      if (IsComm(plan.programs[r].actions[i].kind)) {
        EXPECT_EQ(timing.thread, kCommThread) << "action " << i;
        continue;
      }
      EXPECT_EQ(timing.thread, kComputeThread) << "action " << i;
      EXPECT_GE(timing.start, previous_end) << "action " << i << ": computes overlap";
      previous_end = timing.end;
    }
  }
}

TEST(OpMemorySeam, TheExecutorsFiguresBecomeTheTimelinesBytes) {
  const Plan plan = TwoRankPlan();
  ASSERT_EQ(plan.programs.size(), 2u);
  const TimePoint epoch = Clock::now();
  RecordingTimer zero(epoch);  // op i at [i, i + 0.5] ms: time order is program order
  RecordingTimer one(epoch);
  const std::vector<StatusOr<RankTimeline>> results =
      RunStep<MeteredExecutor>(plan, {&zero, &one}, epoch);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(results[r].ok()) << results[r].status().message();
    const RankProgram& program = plan.programs[r];
    const RankTimeline& timeline = *results[r];
    EXPECT_EQ(timeline.memory_unit, MemoryUnit::kBytes);
    ASSERT_EQ(timeline.action_memory.size(), program.actions.size());
    size_t first_compute = program.actions.size();
    size_t last_compute = 0;
    std::vector<MemorySample> curve;
    std::optional<double> held;
    for (size_t i = 0; i < program.actions.size(); ++i) {
      if (IsComm(program.actions[i].kind)) continue;
      first_compute = std::min(first_compute, i);
      last_compute = i;
      curve.push_back({static_cast<double>(i), 1000.0 * i});
      curve.push_back({i + 0.25, 1000.0 * i + 700});  // the peak, above both ends, mid-action
      curve.push_back({i + 0.5, 1000.0 * i + 400});
    }
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const ActionMemory& m = timeline.action_memory[i];
      const auto at = static_cast<double>(i);
      if (!IsComm(program.actions[i].kind)) {
        EXPECT_EQ(m, (ActionMemory{1000 * at, 1000 * at + 400, 1000 * at + 700})) << "action " << i;
        held = 1000 * at + 400;
        continue;
      }
      // A transfer: the previous compute's end, or before any compute the first one's start.
      const double expected = held.value_or(1000.0 * static_cast<double>(first_compute));
      EXPECT_EQ(m, (ActionMemory{expected, expected, expected})) << "action " << i;
    }
    EXPECT_EQ(timeline.memory, curve);
    EXPECT_EQ(timeline.peak_memory, 1000.0 * static_cast<double>(last_compute) + 700);
    EXPECT_EQ(timeline.peak_activation_memory,
              1000.0 * static_cast<double>(last_compute - first_compute) + 700);
  }
}

TEST(OpMemorySeam, WithoutMeasuredMemoryTheTimelineHasNone) {
  const Plan plan = TwoRankPlan();
  const std::vector<StatusOr<RankTimeline>> results =
      RunStep(plan, {nullptr, nullptr}, Clock::now());
  for (const StatusOr<RankTimeline>& result : results) {
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result->memory_unit, MemoryUnit::kModel);
    EXPECT_TRUE(result->action_memory.empty());
    EXPECT_TRUE(result->memory.empty());
    EXPECT_EQ(result->peak_memory, 0.0);
  }
}

}  // namespace
}  // namespace pipeplan::runtime
