// Ranks that share one device (threads on one GPU): with StepOptions::shared_device they take
// turns, one op at a time, so each op's measured time is its own; the in-process transport
// moves their messages with the copy it is given (a device copy on a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::BuildOrFail;
using testing::RuntimeRequest;

struct Interval {
  double start = 0;
  double end = 0;
  int rank = 0;
  size_t action = 0;
};

// Every compute action of the step, all ranks together, by start time.
std::vector<Interval> ComputeIntervals(const Plan& plan, const Timeline& timeline) {
  std::vector<Interval> all;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsCompute(actions[i].kind)) continue;
      const ActionTiming& t = timeline.ranks[r].actions[i];
      all.push_back({t.start, t.end, static_cast<int>(r), i});
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  return all;
}

// How many times one rank's op began before another rank's had ended.
int Overlaps(const std::vector<Interval>& by_start) {
  int overlaps = 0;
  double latest_end = -1;
  for (const Interval& op : by_start) {
    if (op.start < latest_end) ++overlaps;
    latest_end = std::max(latest_end, op.end);
  }
  return overlaps;
}

struct SharedRun {
  std::vector<Timeline> steps;
  int copies = 0;
};

// zb-h1 at P = 4, M = 8 on synthetic executors (ops of 0.2 to 0.5 ms), messages moved by a
// counting copy; `shared` is the device the ranks take turns on, or null.
SharedRun RunFourRanks(std::mutex* shared) {
  const Plan plan = BuildOrFail(RuntimeRequest({"zb-h1"}, 4, 8, 0.0));
  std::atomic<int> copies = 0;
  const std::vector<std::unique_ptr<Transport>> transports =
      MakeInProcTransports(4, [&](std::span<std::byte> to, std::span<const std::byte> from) {
        ++copies;
        std::memcpy(to.data(), from.data(), to.size());
        return Status::Ok();
      });
  const SyntheticOptions synthetic{.seconds_per_unit = 2e-4, .message_bytes = 64};
  std::vector<std::unique_ptr<OpExecutor>> executors;
  std::vector<OpExecutor*> executor_ptrs;
  std::vector<Transport*> transport_ptrs;
  for (int r = 0; r < 4; ++r) {
    executors.push_back(std::make_unique<SyntheticExecutor>(plan, RankId(r), synthetic));
    executor_ptrs.push_back(executors.back().get());
    transport_ptrs.push_back(transports[r].get());
  }
  LocalRunOptions options;
  options.steps = 2;
  options.warmup = 0;
  options.timeout_seconds = 30;
  options.seconds_per_unit = 1e-6;
  options.shared_device = shared;
  StatusOr<std::vector<Timeline>> steps = RunLocal(plan, executor_ptrs, transport_ptrs, options);
  EXPECT_TRUE(steps.ok()) << steps.status().message();
  SharedRun run;
  if (steps.ok()) run.steps = std::move(*steps);
  run.copies = copies;
  return run;
}

TEST(SharedDevice, RanksTakeTurnsOneOpAtATime) {
  const Plan plan = BuildOrFail(RuntimeRequest({"zb-h1"}, 4, 8, 0.0));
  std::mutex device;
  const SharedRun shared = RunFourRanks(&device);
  ASSERT_EQ(shared.steps.size(), 2u);
  size_t messages = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      messages += IsComm(action.kind) && (action.kind == ActionKind::kSendForward ||
                                          action.kind == ActionKind::kSendBackward)
                      ? 1
                      : 0;
    }
  }
  // Every message went through the given copy (the executors check each one's content).
  EXPECT_EQ(shared.copies, static_cast<int>(2 * messages));
  for (const Timeline& step : shared.steps) {
    const std::vector<Interval> ops = ComputeIntervals(plan, step);
    ASSERT_EQ(ops.size(), 4u * 8u * 3u);
    EXPECT_EQ(Overlaps(ops), 0);
    // One op at a time: the step lasts at least the sum of every rank's work.
    double work = 0;
    for (const Interval& op : ops) work += op.end - op.start;
    EXPECT_GE(step.metrics.makespan, work);
  }
  // The same plan without the shared device runs ranks side by side: the check above sees it.
  const SharedRun concurrent = RunFourRanks(nullptr);
  ASSERT_FALSE(concurrent.steps.empty());
  EXPECT_GT(Overlaps(ComputeIntervals(plan, concurrent.steps.back())), 0);
}

TEST(SharedDevice, AFailedCopyFailsBothEndsNamingThePair) {
  const std::vector<std::unique_ptr<Transport>> transports =
      MakeInProcTransports(2, [](std::span<std::byte>, std::span<const std::byte>) {
        return Internal("cudaMemcpyAsync: an illegal memory access was encountered");
      });
  std::vector<std::byte> sent(8), received(8);
  const std::vector<P2POp> send = {{P2PKind::kSend, RankId(1), sent}};
  const std::vector<P2POp> recv = {{P2PKind::kRecv, RankId(0), received}};
  auto sending = transports[0]->Post(send);
  auto receiving = transports[1]->Post(recv);
  ASSERT_TRUE(sending.ok() && receiving.ok());
  const TimePoint deadline = Clock::now() + std::chrono::seconds(10);
  for (auto* pending : {&(*sending)[0], &(*receiving)[0]}) {
    const Status status = (*pending)->Wait(deadline);
    EXPECT_EQ(status.code(), StatusCode::kInternal);
    EXPECT_EQ(status.message(),
              "rank 0 -> rank 1: copying a message of 8 bytes: cudaMemcpyAsync: an illegal "
              "memory access was encountered");
  }
}

}  // namespace
}  // namespace pipeplan::runtime
