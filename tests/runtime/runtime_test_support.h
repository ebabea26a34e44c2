// Helpers for the runtime tests: plans for every strategy at the size, a harness that
// runs a plan in process with synthetic executors, and an executor that injects faults.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/strategy.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/synthetic_executor.h"

namespace pipeplan::runtime::testing {

struct StrategyCase {
  std::string strategy;
  bool post_validation = false;
};

// Every strategy, plus the zero-bubble family again with post-validation.
std::vector<StrategyCase> AllStrategyCases();
std::string CaseName(const ::testing::TestParamInfo<StrategyCase>& info);

// P ranks, M microbatches, V = 2 where the strategy needs it; per-stage F, I, W costs that
// differ between stages (so a wrong wait shows), comm latency `latency` on every boundary.
PlanRequest RuntimeRequest(const StrategyCase& c, int ranks, int microbatches, double latency);

// What a test can make one executor do at one action of one step.
enum class Fault : uint8_t { kFail, kThrow, kStall };
struct FaultAt {
  RankId rank;
  size_t action_index = 0;
  int step = 0;
  Fault fault = Fault::kFail;
};

// A synthetic executor that misbehaves once, as told.
class FaultyExecutor final : public OpExecutor {
 public:
  FaultyExecutor(const Plan& plan, RankId rank, const SyntheticOptions& options,
                 std::optional<FaultAt> fault)
      : inner_(plan, rank, options), fault_(fault) {}

  Status BeginStep(int step) override { return inner_.BeginStep(step); }
  Status Run(const Action& action, const OpContext& context) override;
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override {
    return inner_.SendBuffer(send, context);
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return inner_.RecvBuffer(recv, context);
  }
  Status EndStep(const OpContext& context) override { return inner_.EndStep(context); }
  std::vector<OpSpan> TakeOpSpans() override { return inner_.TakeOpSpans(); }

 private:
  SyntheticExecutor inner_;
  std::optional<FaultAt> fault_;
};

// Runs `plan` with one (possibly faulty) synthetic executor per rank over in-process
// transports.
StatusOr<std::vector<Timeline>> RunSynthetic(const Plan& plan, const SyntheticOptions& synthetic,
                                             const LocalRunOptions& options,
                                             std::optional<FaultAt> fault = std::nullopt);

}  // namespace pipeplan::runtime::testing
