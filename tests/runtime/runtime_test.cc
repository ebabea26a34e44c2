// The runtime executing real plans in process: every strategy runs to completion with the
// dependencies holding in measured time; a plan that would deadlock is refused before launch;
// failures, exceptions and stalls in one rank stop every rank with an error that names it.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>

#include "pipeplan/checks/validator.h"
#include "pipeplan/runtime/execute.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/synthetic_run.h"
#include "pipeplan/runtime/watchdog.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::AllStrategyCases;
using testing::BuildOrFail;
using testing::CaseName;
using testing::Comm;
using testing::Compute;
using testing::RuntimeRequest;
using testing::StrategyCase;

// Fast settings: ops of 10-26 us, so a step of a whole plan takes a few milliseconds.
SyntheticOptions Fast() { return {.seconds_per_unit = 1e-5, .message_bytes = 64}; }

LocalRunOptions Steps(int steps, double timeout = 20.0) {
  LocalRunOptions options;
  options.steps = steps;
  options.warmup = 0;
  options.timeout_seconds = timeout;
  options.seconds_per_unit = 1e-5;
  return options;
}

// Where each compute part ran: (kind, stage, mb) -> measured interval.
using PartKey = std::tuple<ActionKind, int, int>;
std::map<PartKey, ActionTiming> PartTimes(const Plan& plan, const Timeline& timeline) {
  std::map<PartKey, ActionTiming> times;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (!IsCompute(a.kind)) continue;
      if (a.kind == ActionKind::kOverlapFB) {
        for (const Action& part : a.sub_actions) {
          times[{part.kind, part.stage.value, part.microbatch.value}] =
              timeline.ranks[r].actions[i];
        }
      } else {
        times[{a.kind, a.stage.value, a.microbatch.value}] = timeline.ranks[r].actions[i];
      }
    }
  }
  return times;
}

class RuntimeExecutesEveryStrategy : public ::testing::TestWithParam<StrategyCase> {};

// Measured times must respect the plan: each rank's compute in order without overlap, an
// activation or gradient consumed only after it was produced on the other side, W after its
// I, every receive done before its consumer started.
TEST_P(RuntimeExecutesEveryStrategy, RunsWithDependenciesHoldingInMeasuredTime) {
  const Plan plan = BuildOrFail(RuntimeRequest(GetParam(), 4, 8, 0.2));
  ASSERT_FALSE(plan.programs.empty());
  const StatusOr<std::vector<Timeline>> steps = RunSyntheticInProcess(plan, Fast(), Steps(2));
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  ASSERT_EQ(steps->size(), 2u);
  const StageMap stages(plan.request.topology);
  for (const Timeline& timeline : *steps) {
    EXPECT_EQ(timeline.source, TimelineSource::kMeasured);
    ASSERT_EQ(timeline.ranks.size(), plan.programs.size());
    for (size_t r = 0; r < plan.programs.size(); ++r) {
      ASSERT_EQ(timeline.ranks[r].actions.size(), plan.programs[r].actions.size());
      double previous_end = 0.0;
      for (size_t i = 0; i < plan.programs[r].actions.size(); ++i) {
        const ActionTiming& t = timeline.ranks[r].actions[i];
        EXPECT_LE(t.start, t.end) << "rank " << r << " action " << i;
        if (!IsCompute(plan.programs[r].actions[i].kind)) continue;
        EXPECT_GE(t.start, previous_end) << "rank " << r << " action " << i;
        previous_end = t.end;
      }
      EXPECT_GT(timeline.ranks[r].busy, 0.0);
    }
    const auto times = PartTimes(plan, timeline);
    const int m_count = stages.MicrobatchesOf(StageId(0));
    for (int s = 0; s < stages.num_stages(); ++s) {
      for (int m = 0; m < m_count; ++m) {
        const StageId stage(s);
        auto at = [&](ActionKind kind, int st) { return times.find({kind, st, m}); };
        const auto f = at(ActionKind::kForward, s);
        ASSERT_NE(f, times.end()) << "F of stage " << s << " mb " << m;
        if (!stages.IsFirst(stage)) {
          EXPECT_GE(f->second.start, at(ActionKind::kForward, s - 1)->second.end)
              << "F of stage " << s << " mb " << m << " before its input";
        }
        auto grad = at(ActionKind::kBackward, s);
        if (grad == times.end()) grad = at(ActionKind::kBackwardInput, s);
        ASSERT_NE(grad, times.end());
        EXPECT_GE(grad->second.start, f->second.end);
        if (!stages.IsLast(stage)) {
          auto upstream = at(ActionKind::kBackward, s + 1);
          if (upstream == times.end()) upstream = at(ActionKind::kBackwardInput, s + 1);
          EXPECT_GE(grad->second.start, upstream->second.end)
              << "gradient of stage " << s << " mb " << m << " before its input";
        }
        const auto w = at(ActionKind::kBackwardWeight, s);
        if (w != times.end()) {
          EXPECT_GE(w->second.start, grad->second.end);
        }
      }
    }
    EXPECT_GT(timeline.metrics.makespan, 0.0);
    EXPECT_GT(timeline.metrics.lower_bound, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, RuntimeExecutesEveryStrategy,
                         ::testing::ValuesIn(AllStrategyCases()), CaseName);

// Rank 0 waits for the gradient of mb 0 before it sends mb 1; rank 1 runs F1 before B0, so
// it needs mb 1 first: a real deadlock under any semantics.
Plan DeadlockingPlan() {
  PlanRequest request = RuntimeRequest({"1f1b"}, 2, 2, 0.0);
  Plan plan = BuildOrFail(request);
  plan.programs[0].actions = {
      Compute(ActionKind::kForward, 0, 0),      Comm(ActionKind::kSendForward, 0, 0, 1),
      Compute(ActionKind::kForward, 0, 1),      Comm(ActionKind::kRecvBackward, 0, 0, 1),
      Compute(ActionKind::kBackward, 0, 0),     Comm(ActionKind::kSendForward, 0, 1, 1),
      Comm(ActionKind::kRecvBackward, 0, 1, 1), Compute(ActionKind::kBackward, 0, 1)};
  plan.programs[1].actions = {
      Comm(ActionKind::kRecvForward, 1, 0, 0), Compute(ActionKind::kForward, 1, 0),
      Comm(ActionKind::kRecvForward, 1, 1, 0), Compute(ActionKind::kForward, 1, 1),
      Compute(ActionKind::kBackward, 1, 0),    Comm(ActionKind::kSendBackward, 1, 0, 0),
      Compute(ActionKind::kBackward, 1, 1),    Comm(ActionKind::kSendBackward, 1, 1, 0)};
  return plan;
}

TEST(RuntimeLaunch, RefusesAPlanThatWouldDeadlockNamingTheCycle) {
  const StatusOr<std::vector<Timeline>> run =
      RunSyntheticInProcess(DeadlockingPlan(), Fast(), Steps(1));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(run.status().message().find("refusing to launch"), std::string::npos);
  EXPECT_NE(run.status().message().find("deadlock: rank 0, action 3 (0RECV_B0) waits for rank 1"),
            std::string::npos)
      << run.status().message();
}

TEST(RuntimeLaunch, RefusesAnIncompletePlan) {
  Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 2, 2, 0.0));
  plan.programs[1].actions.pop_back();
  const StatusOr<std::vector<Timeline>> run = RunSyntheticInProcess(plan, Fast(), Steps(1));
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kFailedPrecondition);
}

TEST(RuntimeLaunch, RejectsMismatchedExecutorsAndOptions) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 2, 2, 0.0));
  std::vector<OpExecutor*> none;
  std::vector<Transport*> no_transports;
  const auto run = RunLocal(plan, none, no_transports, Steps(1));
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("2 ranks but 0 executors"), std::string::npos);
  LocalRunOptions zero = Steps(1);
  zero.steps = 0;
  EXPECT_FALSE(RunSyntheticInProcess(plan, Fast(), zero).ok());
}

// The index of the n-th compute action of `rank` in `plan`.
size_t ComputeIndex(const Plan& plan, int rank, int n) {
  const auto& actions = plan.programs[rank].actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (IsCompute(actions[i].kind) && n-- == 0) return i;
  }
  ADD_FAILURE() << "rank " << rank << " has too few compute actions";
  return 0;
}

struct FaultCase {
  FaultKind fault;
  std::string expected;  // in the message
  StatusCode code;
};

class RuntimeFaults : public ::testing::TestWithParam<FaultCase> {};

// A fault on rank 2 in the second step stops all four ranks promptly; the error names the
// rank and the action, and no thread is left behind (the call returns at all).
TEST_P(RuntimeFaults, OneRankFailingStopsEveryRankWithItsError) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 4, 8, 0.0));
  const size_t index = ComputeIndex(plan, 2, 3);
  const Fault fault{GetParam().fault, RankId(2), index, 1};
  const TimePoint begin = Clock::now();
  const auto run = RunSyntheticInProcess(plan, Fast(), Steps(3, /*timeout=*/0.5), fault);
  const double took = SecondsBetween(begin, Clock::now());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), GetParam().code) << run.status().message();
  const std::string where = "rank 2, action " + std::to_string(index) + " (" +
                            ToString(plan.programs[2].actions[index]) + ")";
  EXPECT_NE(run.status().message().find(where), std::string::npos) << run.status().message();
  EXPECT_NE(run.status().message().find(GetParam().expected), std::string::npos)
      << run.status().message();
  EXPECT_LT(took, 10.0);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, RuntimeFaults,
    ::testing::Values(FaultCase{FaultKind::kFail, "injected failure", StatusCode::kInternal},
                      FaultCase{FaultKind::kThrow, "the executor threw: injected exception",
                                StatusCode::kInternal},
                      FaultCase{FaultKind::kStall, "has been running for",
                                StatusCode::kDeadlineExceeded}),
    [](const ::testing::TestParamInfo<FaultCase>& param) {
      switch (param.param.fault) {
        case FaultKind::kFail:
          return std::string("Fail");
        case FaultKind::kThrow:
          return std::string("Throw");
        case FaultKind::kStall:
          return std::string("Stall");
        case FaultKind::kCrash:
          return std::string("Crash");
        case FaultKind::kTruncate:
          return std::string("Truncate");
      }
      return std::string("Unknown");
    });

// A malformed message: rank 1's first SEND_F of the second step carries half its bytes. The
// receive on rank 2 fails naming both sizes, and every rank stops well within the timeout.
TEST(RuntimeMalformedMessage, StopsEveryRankNamingBothSizes) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 4, 8, 0.0));
  const auto& actions = plan.programs[1].actions;
  size_t index = 0;
  while (index < actions.size() && actions[index].kind != ActionKind::kSendForward) ++index;
  ASSERT_LT(index, actions.size());
  const Fault fault{FaultKind::kTruncate, RankId(1), index, 1};
  ASSERT_TRUE(CheckFault(plan, fault, 3).ok());
  const TimePoint begin = Clock::now();
  const auto run = RunSyntheticInProcess(plan, Fast(), Steps(3, /*timeout=*/5.0), fault);
  const double took = SecondsBetween(begin, Clock::now());
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("32 bytes met a receive of 64 bytes"), std::string::npos)
      << run.status().message();
  EXPECT_LT(took, 5.0);
}

TEST(FaultInjection, TruncateHitsASendAndOtherKindsACompute) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 2, 2, 0.0));
  const size_t compute = ComputeIndex(plan, 0, 0);
  EXPECT_EQ(CheckFault(plan, {FaultKind::kTruncate, RankId(0), compute, 0}, 1).message(),
            "rank 0, action " + std::to_string(compute) + " is " +
                ToString(plan.programs[0].actions[compute]) +
                ", not a send (truncate hits a send)");
  const StatusOr<Fault> parsed = ParseFault("truncate@0:1:2");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->kind, FaultKind::kTruncate);
}

// An executor, with a meter and a gradient exchange, that counts the calls it gets.
class Counting final : public OpExecutor, public OpMeter, public GradientExchange {
 public:
  explicit Counting(int* calls) : calls_(calls) {}
  Status BeginStep(const OpContext&) override { return Count(); }
  Status Run(const Action&, const OpContext&) override { return Count(); }
  StatusOr<std::span<std::byte>> SendBuffer(const Action&, const OpContext&) override {
    return Counted(std::span<std::byte>());
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action&, const OpContext&) override {
    return Counted(std::span<std::byte>());
  }
  Status SendCompleted(const Action&, const OpContext&) override { return Count(); }
  Status EndStep(const OpContext&) override { return Count(); }
  OpMeter* meter() override { return this; }
  GradientExchange* gradient_exchange() override { return this; }
  std::optional<RankId> GradientMirror() const override {
    ++*calls_;
    return RankId(1);
  }
  StatusOr<MirrorBuffers> MirrorGradientBuffers(const OpContext&) override {
    return Counted(MirrorBuffers{});
  }
  Status MirrorReceived(const OpContext&) override { return Count(); }
  bool ExchangesGradientState() const override {
    ++*calls_;
    return true;
  }
  StatusOr<std::span<std::byte>> GradientStateBuffer(RankId, const OpContext&) override {
    return Counted(std::span<std::byte>());
  }
  StatusOr<Verdict> Validate(const Action&, const OpContext&) override {
    return Counted(Verdict::kKept);
  }
  std::vector<OpSpan> TakeOpSpans() override { return Counted(std::vector<OpSpan>{}); }
  std::vector<OpMemory> TakeOpMemory() override { return Counted(std::vector<OpMemory>{}); }
  std::vector<StageStatic> StageStaticBytes() override {
    return Counted(std::vector<StageStatic>{});
  }

 private:
  Status Count() { return Counted(Status::Ok()); }
  template <typename T>
  T Counted(T value) {
    ++*calls_;
    return value;
  }
  int* calls_;
};

// Everything but the injected fault is the wrapped executor's: each call reaches it, and its
// meter and gradient exchange are the wrapper's (a dropped MirrorReceived would train dual
// placement's copies apart; a dropped SendCompleted or TakeOpMemory would lose memory figures).
TEST(FaultInjection, EveryOtherCallReachesTheWrappedExecutor) {
  int calls = 0;
  // The fault is for rank 1; this executor serves rank 0, so nothing is injected.
  FaultInjectingExecutor wrapped(std::make_unique<Counting>(&calls), RankId(0),
                                 Fault{FaultKind::kFail, RankId(1), 0, 0});
  const OpContext context;
  const Action action = MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0));
  EXPECT_TRUE(wrapped.BeginStep(context).ok());
  EXPECT_TRUE(wrapped.Run(action, context).ok());
  EXPECT_TRUE(wrapped.SendBuffer(action, context).ok());
  EXPECT_TRUE(wrapped.RecvBuffer(action, context).ok());
  EXPECT_TRUE(wrapped.SendCompleted(action, context).ok());
  EXPECT_TRUE(wrapped.EndStep(context).ok());
  EXPECT_TRUE(wrapped.Validate(action, context).ok());
  GradientExchange* gradients = wrapped.gradient_exchange();
  ASSERT_NE(gradients, nullptr);
  EXPECT_EQ(gradients->GradientMirror(), RankId(1));
  EXPECT_TRUE(gradients->MirrorGradientBuffers(context).ok());
  EXPECT_TRUE(gradients->MirrorReceived(context).ok());
  EXPECT_TRUE(gradients->ExchangesGradientState());
  EXPECT_TRUE(gradients->GradientStateBuffer(RankId(0), context).ok());
  OpMeter* meter = wrapped.meter();
  ASSERT_NE(meter, nullptr);
  meter->TakeOpSpans();
  meter->TakeOpMemory();
  meter->StageStaticBytes();
  EXPECT_EQ(calls, 15);
}

// A stall in rank 0's compute leaves rank 1 waiting for its activation; the report names
// rank 0 as the one that stopped, then rank 1 and what it waits for.
TEST(RuntimeWatchdog, FollowsWaitsToTheRankThatStopped) {
  const Plan plan = BuildOrFail(RuntimeRequest({"gpipe"}, 2, 4, 0.0));
  const size_t index = ComputeIndex(plan, 0, 2);  // F of mb 2
  const TimePoint begin = Clock::now();
  const auto run = RunSyntheticInProcess(plan, Fast(), Steps(1, 0.3),
                                         Fault{FaultKind::kStall, RankId(0), index, 0});
  ASSERT_FALSE(run.ok());
  EXPECT_LT(SecondsBetween(begin, Clock::now()), 10.0);
  const std::string message = run.status().message();
  EXPECT_EQ(
      message.find("stalled: rank 0, action " + std::to_string(index) + " (0F2) has been running"),
      0u)
      << message;
  EXPECT_NE(message.find("; rank 1, action"), std::string::npos) << message;
  EXPECT_NE(message.find("waits for the activation of stage 0 microbatch 2 from rank 0"),
            std::string::npos)
      << message;
}

// With the launch check bypassed, the per-rank pieces alone (ExecuteStep, a watchdog, the
// transport's abort) still turn a real deadlock into an error on both ranks.
TEST(RuntimeWatchdog, BreaksARealDeadlockWhenTheLaunchCheckIsBypassed) {
  const Plan plan = DeadlockingPlan();
  ASSERT_FALSE(DryRun(plan).ok());
  auto transports = MakeInProcTransports(2);
  std::vector<std::unique_ptr<SyntheticExecutor>> executors;
  std::vector<PreparedProgram> programs;
  std::vector<RankProgress> progress(2);
  for (int r = 0; r < 2; ++r) {
    executors.push_back(std::make_unique<SyntheticExecutor>(plan, RankId(r), Fast()));
    programs.emplace_back(plan.programs[r]);
  }
  StepOptions options;
  options.epoch = Clock::now();
  std::vector<Status> results(2);
  Status stall;
  {
    const Watchdog watchdog({{&plan.programs[0], &progress[0]}, {&plan.programs[1], &progress[1]}},
                            0.2, [&](const Status& status) {
                              stall = status;
                              transports[0]->Abort(status);
                            });
    std::vector<std::jthread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        StepOptions mine = options;
        mine.progress = &progress[r];
        results[r] = ExecuteStep(programs[r], *executors[r], *transports[r], mine).status();
      });
    }
  }
  EXPECT_EQ(stall.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(stall.message().find("waits for"), std::string::npos) << stall.message();
  for (const Status& result : results) {
    EXPECT_EQ(result.code(), StatusCode::kAborted) << result.message();
    EXPECT_NE(result.message().find("stalled"), std::string::npos) << result.message();
  }
}

TEST(WatchdogDiagnosis, SaysNothingBeforeTheTimeoutAndNamesTheWaitAfterIt) {
  RankProgram program;
  program.rank = RankId(1);
  program.actions = {Comm(ActionKind::kRecvForward, 1, 0, 0), Compute(ActionKind::kForward, 1, 0)};
  RankProgress progress;
  progress.Set(Activity::kWaiting, 1, 0);
  const std::vector<WatchedRank> ranks = {{&program, &progress}};
  EXPECT_TRUE(DiagnoseStall(ranks, 1.0, Clock::now()).ok());
  const Status stall = DiagnoseStall(ranks, 1.0, AfterSeconds(Clock::now(), 2.0));
  EXPECT_EQ(stall.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stall.message().find("stalled: rank 1, action 1 (1F0) waits for the activation of "
                                 "stage 0 microbatch 0 from rank 0 (action 0): nothing for 2"),
            0u)
      << stall.message();
  progress.Set(Activity::kDone, kNoAction);
  EXPECT_TRUE(DiagnoseStall(ranks, 1.0, AfterSeconds(Clock::now(), 2.0)).ok());
}

TEST(FaultInjection, ParsesKindRankActionAndStep) {
  const StatusOr<Fault> stall = ParseFault("stall@2:17");
  ASSERT_TRUE(stall.ok()) << stall.status().message();
  EXPECT_EQ(stall->kind, FaultKind::kStall);
  EXPECT_EQ(stall->rank, RankId(2));
  EXPECT_EQ(stall->action_index, 17u);
  EXPECT_EQ(stall->step, 0);
  const StatusOr<Fault> fail = ParseFault("fail@0:3:4");
  ASSERT_TRUE(fail.ok());
  EXPECT_EQ(fail->kind, FaultKind::kFail);
  EXPECT_EQ(fail->step, 4);
  for (const char* bad : {"stall", "hang@1:2", "fail@1", "fail@1:x", "fail@-1:2", "fail@1:2:3:4"}) {
    const StatusOr<Fault> parsed = ParseFault(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find(std::string("fault '") + bad + "'"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(PreparedProgram, ConsumersWaitOnTheirOwnReceivesAndCommFormsGroups) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 2, 2, 0.0));
  const RankProgram& rank1 = plan.programs[1];
  const PreparedProgram prepared(rank1);
  int checked = 0;
  for (size_t i = 0; i < rank1.actions.size(); ++i) {
    const Action& a = rank1.actions[i];
    if (a.kind == ActionKind::kForward) {
      ASSERT_EQ(prepared.InputsOf(i).size(), 1u) << ToString(a);
      const Action& recv = rank1.actions[prepared.InputsOf(i)[0]];
      EXPECT_EQ(recv.kind, ActionKind::kRecvForward);
      EXPECT_EQ(recv.microbatch, a.microbatch);
      EXPECT_LT(prepared.InputsOf(i)[0], i);
      ++checked;
    }
    if (a.kind == ActionKind::kBackward) {
      EXPECT_TRUE(prepared.InputsOf(i).empty());  // the last stage
    }
    if (IsComm(a.kind)) {
      const size_t end = prepared.GroupEnd(i);
      EXPECT_GT(end, i);
      for (size_t k = i; k < end; ++k) EXPECT_TRUE(IsComm(rank1.actions[k].kind));
      EXPECT_TRUE(end == rank1.actions.size() || !IsComm(rank1.actions[end].kind));
    }
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace pipeplan::runtime
