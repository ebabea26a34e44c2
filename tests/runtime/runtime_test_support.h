// Helpers for the runtime tests: every strategy case (the zero-bubble family twice, with and
// without post-validation) and requests for them at the size.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/runtime/synthetic_executor.h"
#include "pipeplan/strategies/strategy.h"

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

// Actions for hand-written programs.
Action Compute(ActionKind kind, int stage, int mb);
Action Comm(ActionKind kind, int stage, int mb, int peer);

// The plan, or an empty one after a test failure naming why it did not plan.
Plan BuildOrFail(const PlanRequest& request);

// `strategy` at P ranks of V stages, M = 2P, default costs.
PlanRequest SmallRequest(const std::string& strategy, int ranks, int stages_per_rank,
                         bool post_validation);

// The synthetic executor (every consumed message checked to be the one expected) with a
// gradient state of (its rank, the step): each step's exchange starts with every rank's row
// at -1 (cleared at its first ask, once the previous step's sends are done), and asking for
// its own buffer writes it. Tests derive to observe or disturb a rank.
class SyntheticWithState : public OpExecutor, public GradientExchange {
 public:
  SyntheticWithState(const Plan& plan, RankId rank, const SyntheticOptions& options);

  Status BeginStep(const OpContext& context) override { return inner_.BeginStep(context); }
  Status Run(const Action& action, const OpContext& context) override {
    return inner_.Run(action, context);
  }
  StatusOr<Verdict> Validate(const Action& pv, const OpContext& context) override {
    return inner_.Validate(pv, context);
  }
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override {
    return inner_.SendBuffer(send, context);
  }
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return inner_.RecvBuffer(recv, context);
  }
  Status EndStep(const OpContext& context) override { return inner_.EndStep(context); }
  GradientExchange* gradient_exchange() override { return this; }
  bool ExchangesGradientState() const override { return true; }
  StatusOr<std::span<std::byte>> GradientStateBuffer(RankId rank,
                                                     const OpContext& context) override;

 protected:
  RankId rank() const { return rank_; }
  // Every rank's row, as the exchange left them.
  const std::vector<std::array<double, 2>>& states() const { return states_; }

 private:
  SyntheticExecutor inner_;
  RankId rank_;
  std::vector<std::array<double, 2>> states_;
  int cleared_for_step_ = -1;
};

}  // namespace pipeplan::runtime::testing
