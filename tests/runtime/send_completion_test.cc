// A sent buffer may be freed once the runtime reports its send completed
// (OpExecutor::SendCompleted), not only at the step's end. The executor here scribbles over
// each buffer as soon as it is told, and the receivers check every message they consume
// (SyntheticExecutor), so a report that came before the message landed fails the step. Every
// buffer handed out for a send is reported once before EndStep, for every strategy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "runtime_test_support.h"

namespace pipeplan::runtime {
namespace {

using testing::AllStrategyCases;
using testing::BuildOrFail;
using testing::CaseName;
using testing::RuntimeRequest;
using testing::StrategyCase;

// When a send was reported: its action, and how many compute actions the rank had run by then.
struct Report {
  size_t action_index = 0;
  int computes_before = 0;
};

class ScribblingExecutor final : public OpExecutor, public OpMeter {
 public:
  ScribblingExecutor(const Plan& plan, RankId rank, const SyntheticOptions& options)
      : inner_(plan, rank, options) {}

  Status BeginStep(const OpContext& context) override {
    computes_ = 0;
    steps_.emplace_back();
    return inner_.BeginStep(context);
  }
  Status Run(const Action& action, const OpContext& context) override {
    ++computes_;
    return inner_.Run(action, context);
  }
  StatusOr<Verdict> Validate(const Action& pv, const OpContext& context) override {
    ++computes_;
    return inner_.Validate(pv, context);
  }
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override {
    if (in_flight_.contains(context.action_index)) {
      return Internal("a send's buffer was asked for again before its send completed");
    }
    StatusOr<std::span<std::byte>> buffer = inner_.SendBuffer(send, context);
    if (buffer.ok()) in_flight_[context.action_index] = *buffer;
    return buffer;
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return inner_.RecvBuffer(recv, context);
  }
  Status SendCompleted(const Action& /*send*/, const OpContext& context) override {
    const auto found = in_flight_.find(context.action_index);
    if (found == in_flight_.end()) return Internal("a send was reported completed twice");
    std::fill(found->second.begin(), found->second.end(), std::byte{0xEE});
    in_flight_.erase(found);
    steps_.back().push_back({context.action_index, computes_});
    return Status::Ok();
  }
  Status EndStep(const OpContext& context) override {
    if (!in_flight_.empty()) {
      return Internal("the step ended with " + std::to_string(in_flight_.size()) +
                      " sends never reported completed");
    }
    return inner_.EndStep(context);
  }
  OpMeter* meter() override { return this; }
  std::vector<OpSpan> TakeOpSpans() override { return inner_.TakeOpSpans(); }

  // Per step, the sends reported, in order.
  const std::vector<std::vector<Report>>& steps() const { return steps_; }

 private:
  SyntheticExecutor inner_;
  int computes_ = 0;
  std::map<size_t, std::span<std::byte>> in_flight_;
  std::vector<std::vector<Report>> steps_;
};

struct ScribbledRun {
  Status status;
  std::vector<std::unique_ptr<ScribblingExecutor>> executors;
};

ScribbledRun RunScribbling(const Plan& plan, int steps) {
  const int ranks = static_cast<int>(plan.programs.size());
  const std::vector<std::unique_ptr<Transport>> transports = MakeInProcTransports(ranks);
  ScribbledRun run;
  std::vector<OpExecutor*> executors;
  std::vector<Transport*> transport_ptrs;
  for (int r = 0; r < ranks; ++r) {
    run.executors.push_back(std::make_unique<ScribblingExecutor>(
        plan, RankId(r), SyntheticOptions{.seconds_per_unit = 1e-5, .message_bytes = 256}));
    executors.push_back(run.executors.back().get());
    transport_ptrs.push_back(transports[r].get());
  }
  LocalRunOptions options;
  options.steps = steps;
  options.warmup = 0;
  options.timeout_seconds = 20;
  options.seconds_per_unit = 1e-5;
  run.status = RunLocal(plan, executors, transport_ptrs, options).status();
  return run;
}

size_t SendsOf(const RankProgram& program) {
  return static_cast<size_t>(
      std::count_if(program.actions.begin(), program.actions.end(), [](const Action& a) {
        return a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward ||
               a.kind == ActionKind::kSendPostValidation;
      }));
}

class SendCompletion : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(SendCompletion, EverySendIsReportedOnceAfterItsMessageLanded) {
  const Plan plan = BuildOrFail(RuntimeRequest(GetParam(), 4, 8, 0.2));
  ASSERT_FALSE(plan.programs.empty());
  const ScribbledRun run = RunScribbling(plan, 2);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const ScribblingExecutor& executor = *run.executors[r];
    ASSERT_EQ(executor.steps().size(), 2u) << "rank " << r;
    for (const std::vector<Report>& step : executor.steps()) {
      // A replayed forward's send is handed out (and reported) twice; every send at least once.
      std::vector<size_t> reported;
      for (const Report& report : step) reported.push_back(report.action_index);
      std::sort(reported.begin(), reported.end());
      reported.erase(std::unique(reported.begin(), reported.end()), reported.end());
      EXPECT_EQ(reported.size(), SendsOf(plan.programs[r])) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, SendCompletion, ::testing::ValuesIn(AllStrategyCases()),
                         CaseName);

// In 1F1B at P = 4 the last rank runs F0 B0 F1 B1 F2 ...; its F2 needs rank 2's F2, which rank
// 2 runs after its B0, which needed the gradient rank 3 sent after B0. So by F2 that send has
// completed, and the in-process transport (which tells completion without blocking) lets the
// runtime report it there, two steps' worth of compute before the step ends.
TEST(SendCompletion, AGradientIsReportedOnceItsReceiverHasIt) {
  const Plan plan = BuildOrFail(RuntimeRequest({"1f1b"}, 4, 8, 0.0));
  ASSERT_FALSE(plan.programs.empty());
  const ScribbledRun run = RunScribbling(plan, 1);
  ASSERT_TRUE(run.status.ok()) << run.status.message();
  const std::vector<Action>& last = plan.programs[3].actions;
  size_t send_b0 = last.size();
  int computes_before_f2 = -1;
  int computes = 0;
  for (size_t i = 0; i < last.size(); ++i) {
    const Action& a = last[i];
    if (a.kind == ActionKind::kSendBackward && a.microbatch.value == 0) send_b0 = i;
    if (a.kind == ActionKind::kForward && a.microbatch.value == 2) computes_before_f2 = computes;
    if (IsCompute(a.kind)) ++computes;
  }
  ASSERT_LT(send_b0, last.size());
  ASSERT_EQ(computes_before_f2, 4);  // F0 B0 F1 B1
  const std::vector<Report>& reports = run.executors[3]->steps().front();
  const auto report = std::find_if(reports.begin(), reports.end(),
                                   [&](const Report& r) { return r.action_index == send_b0; });
  ASSERT_NE(report, reports.end());
  EXPECT_LE(report->computes_before, computes_before_f2);
}

}  // namespace
}  // namespace pipeplan::runtime
