// A strategy registered in one place (RegisterStrategy) is planned by `plan`, listed by
// `plan --help`, a row of `compare` and a candidate of `auto`, with its traits read from the
// registry: nothing about a strategy is keyed by its name elsewhere.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "pipeplan/app/command.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/plannable.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan {
namespace {

// Every forward, then every backward, one stage per rank: GPipe's order, written here.
StatusOr<ComputeOrder> AllForwardsFirst(const PlanRequest& request, const StageMap& /*stages*/) {
  const Topology& t = request.topology;
  ComputeOrder order(t.ranks);
  for (int r = 0; r < t.ranks; ++r) {
    for (int m = 0; m < t.microbatches; ++m) {
      order[r].push_back(MakeCompute(ActionKind::kForward, StageId(r), MicrobatchId(m)));
    }
    for (int m = 0; m < t.microbatches; ++m) {
      order[r].push_back(MakeCompute(ActionKind::kBackward, StageId(r), MicrobatchId(m)));
    }
  }
  return order;
}

Strategy Toy() {
  return Strategy{"toy-forwards-first",
                  "a test's own strategy",
                  Placement::kLoop,
                  1,
                  1,
                  AllForwardsFirst,
                  nullptr,
                  /*post_validation=*/true};
}

PlanRequest Request(const std::string& strategy) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = 4;
  request.topology.microbatches = 8;
  return request;
}

TEST(StrategyRegistration, ARegisteredStrategyIsPlannedListedComparedAndSearched) {
  ASSERT_TRUE(RegisterStrategy(Toy()).ok());
  // plan
  const StatusOr<Evaluated> planned = BuildAndSimulatePlan(Request("toy-forwards-first"));
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  EXPECT_EQ(planned->plan.request.strategy, "toy-forwards-first");
  // plan --help
  ::testing::internal::CaptureStdout();
  app::PrintHelp("Strategies:\n@STRATEGIES@\n");
  const std::string help = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(help.find("toy-forwards-first"), std::string::npos) << help;
  EXPECT_NE(help.find("a test's own strategy"), std::string::npos) << help;
  EXPECT_NE(StrategyNames().find("toy-forwards-first"), std::string::npos);
  // compare's rows and auto's candidates, with post-validation as its trait says
  for (const bool pv : {false, true}) {
    PlanRequest request = Request("auto");
    request.options.post_validation = pv;
    bool listed = false;
    for (const Strategy* strategy : CandidateStrategies(request)) {
      listed = listed || strategy->name == "toy-forwards-first";
    }
    EXPECT_TRUE(listed) << "post-validation " << pv;
    const StatusOr<AutoResult> result = AutoSearch(request);
    ASSERT_TRUE(result.ok()) << result.status().message();
    bool candidate = false;
    for (const AutoCandidate& c : result->candidates) {
      candidate = candidate || (c.request.strategy == "toy-forwards-first" && c.status.ok());
    }
    EXPECT_TRUE(candidate) << "post-validation " << pv;
  }
  EXPECT_TRUE(SupportsPostValidation("toy-forwards-first"));
  EXPECT_NE(PostValidationStrategyNames().find("toy-forwards-first"), std::string::npos);
  // the one lookup every front end and Normalize read a strategy's traits from
  const std::optional<PlannableStrategy> traits = FindPlannableStrategy("toy-forwards-first");
  ASSERT_TRUE(traits.has_value());
  EXPECT_EQ(traits->placement, Placement::kLoop);
  EXPECT_EQ(traits->max_stages_per_rank, 1);
  EXPECT_FALSE(traits->solver_made);
  EXPECT_NE(PlannableStrategyNames().find("toy-forwards-first"), std::string::npos);
}

TEST(StrategyRegistration, TheSolverMadeStrategiesAreLookedUpWithTheCatalogue) {
  const std::optional<PlannableStrategy> v = FindPlannableStrategy("optimal-v");
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->solver_made);
  EXPECT_EQ(v->placement, Placement::kVShape);
  EXPECT_EQ(v->min_stages_per_rank, 2);
  EXPECT_EQ(v->max_stages_per_rank, 2);
  const std::optional<PlannableStrategy> zbv = FindPlannableStrategy("zbv");
  ASSERT_TRUE(zbv.has_value());
  EXPECT_FALSE(zbv->solver_made);
  EXPECT_EQ(zbv->placement, Placement::kVShape);
  EXPECT_FALSE(FindPlannableStrategy("auto").has_value());  // it chooses, it is not one
  EXPECT_FALSE(FindPlannableStrategy("2f2b").has_value());
  // The catalogue first, then the solver-made ones, then auto: the order --help lists them.
  const std::string names = PlannableStrategyNames();
  EXPECT_LT(names.find("1f1b"), names.find("optimal"));
  EXPECT_EQ(names.substr(names.size() - 6), ", auto");
}

TEST(StrategyRegistration, RefusesWhatCannotBeAStrategy) {
  Strategy nameless = Toy();
  nameless.name = "";
  EXPECT_FALSE(RegisterStrategy(nameless).ok());
  Strategy taken = Toy();
  taken.name = "1f1b";
  EXPECT_NE(RegisterStrategy(taken).message().find("registered already"), std::string::npos);
  Strategy searching = Toy();
  searching.name = "auto";
  EXPECT_FALSE(RegisterStrategy(searching).ok());
  Strategy no_generator = Toy();
  no_generator.name = "toy-without-generator";
  no_generator.generate = nullptr;
  EXPECT_NE(RegisterStrategy(no_generator).message().find("no generator"), std::string::npos);
  Strategy no_v = Toy();
  no_v.name = "toy-without-v";
  no_v.min_stages_per_rank = 3;
  no_v.max_stages_per_rank = 2;
  EXPECT_NE(RegisterStrategy(no_v).message().find("accepts no V"), std::string::npos);
  EXPECT_EQ(FindStrategy("toy-without-v"), nullptr);
}

}  // namespace
}  // namespace pipeplan
