// MakePlan, the one way in: each path (a catalogue strategy, auto, a solver-made strategy, auto
// with the solver) gives the plan its own function gives, simulated once, with notes that say
// how it was chosen; and the options that do not fit the request are refused by name.
#include "pipeplan/planner/make_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/simulation/simulator.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

// A solver that gives up at once: the heuristic it was warm-started from stands.
PlanOptions WithSolverGivingUp(int& calls) {
  PlanOptions options;
  options.solve = [&calls](const SolverInstance&) -> StatusOr<SolverOutcome> {
    ++calls;
    SolverOutcome gave_up;
    gave_up.result = SolverOutcome::Result::kUnknown;
    return gave_up;
  };
  return options;
}

TEST(MakePlan, ACatalogueStrategyIsBuildAndSimulatePlansPlanSimulatedOnce) {
  const PlanRequest request = MakeRequest("zb-h1", 4, 8, 1, 1, 1.2, 0.8, 0.1);
  const SimulationCount count;
  const StatusOr<Evaluated> made = MakePlan(request, PlanOptions{});
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(count.value(), 1);
  const StatusOr<Evaluated> direct = BuildAndSimulatePlan(request);
  ASSERT_TRUE(direct.ok()) << direct.status().message();
  EXPECT_EQ(made->plan, direct->plan);
  EXPECT_EQ(made->timeline, direct->timeline);
  EXPECT_TRUE(made->notes.empty());
}

TEST(MakePlan, AutoIsAutoSearchsPickAndSaysWhatItChose) {
  const PlanRequest request = MakeRequest("auto", 4, 8, 1, 1, 1.2, 0.8, 0.1);
  const StatusOr<AutoResult> searched = AutoSearch(request);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  const SimulationCount count;
  const StatusOr<Evaluated> made = MakePlan(request, PlanOptions{});
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_LE(count.value(), static_cast<int>(searched->candidates.size()));
  EXPECT_EQ(made->plan, searched->best.plan);
  EXPECT_EQ(made->timeline, testing::SimulateOrDie(made->plan));
  ASSERT_FALSE(made->notes.empty());
  const PlanRequest& picked = made->plan.request;
  std::string settings;
  if (picked.options.microbatch_group_size > 0) {
    settings = ", microbatch groups of " + std::to_string(picked.options.microbatch_group_size);
  }
  const std::string expected_start =
      "auto chose " + picked.strategy + " (V=" + std::to_string(picked.topology.stages_per_rank) +
      settings + "): makespan " + FormatCompact(made->timeline.metrics.makespan) + ", peak memory ";
  EXPECT_EQ(made->notes[0].rfind(expected_start, 0), 0u) << made->notes[0];
}

TEST(MakePlan, ASolverMadeStrategyRunsTheGivenSolverAndKeepsTheHeuristicItCouldNotBeat) {
  int calls = 0;
  const StatusOr<Evaluated> made =
      MakePlan(MakeRequest("optimal", 2, 4, 1, 1, 1, 1, 0.5), WithSolverGivingUp(calls));
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(made->timeline, testing::SimulateOrDie(made->plan));
  ASSERT_FALSE(made->notes.empty());
  EXPECT_EQ(made->notes[0].rfind(
                "optimal: makespan " + FormatCompact(made->timeline.metrics.makespan) + ", ", 0),
            0u)
      << made->notes[0];
  EXPECT_NE(made->notes[0].find("; best heuristic "), std::string::npos) << made->notes[0];
}

TEST(MakePlan, AutoWithTheSolverKeepsAutosPickWhenNoSolveBeatsIt) {
  const PlanRequest request = MakeRequest("auto", 3, 6, 1, 1, 1, 1, 0.5);
  const StatusOr<AutoResult> searched = AutoSearch(request);
  ASSERT_TRUE(searched.ok()) << searched.status().message();
  int calls = 0;
  PlanOptions options = WithSolverGivingUp(calls);
  options.with_solver = true;
  const StatusOr<Evaluated> made = MakePlan(request, options);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_GE(calls, 1);
  EXPECT_EQ(made->plan, searched->best.plan);
  EXPECT_EQ(made->timeline, searched->best.timeline);
  ASSERT_FALSE(made->notes.empty());
  EXPECT_NE(made->notes[0].find("; none of " + std::to_string(calls) +
                                " solver-made candidates was faster"),
            std::string::npos)
      << made->notes[0];
}

TEST(MakePlan, RefusesOptionsThatDoNotFitTheRequest) {
  struct Case {
    PlanRequest request;
    bool with_solver;
    std::string expected;
  };
  PlanRequest validated = MakeRequest("auto", 4, 8);
  validated.options.post_validation = true;
  const Case cases[] = {
      {MakeRequest("1f1b", 4, 8), true,
       "with_solver applies to strategy auto only (1f1b is one strategy)"},
      {MakeRequest("optimal", 4, 8), true,
       "with_solver applies to strategy auto only (optimal is solver-made already)"},
      {MakeRequest("optimal", 4, 8), false,
       "optimal is made by a constraint solver, and none was given (PlanOptions::solve: "
       "app::RunCpSat runs OR-Tools' CP-SAT)"},
      {validated, true,
       "with_solver: the solver-made strategies insert no post-validation "
       "(options.post_validation); plan auto with it without the solver"},
  };
  for (const Case& c : cases) {
    int calls = 0;
    PlanOptions options = c.expected.find("none was given") == std::string::npos
                              ? WithSolverGivingUp(calls)
                              : PlanOptions{};
    options.with_solver = c.with_solver;
    const StatusOr<Evaluated> made = MakePlan(c.request, options);
    EXPECT_EQ(made.status().message(), c.expected);
    EXPECT_EQ(calls, 0) << c.expected;
  }
}

TEST(MakePlan, TheLowerEntriesPointToIt) {
  EXPECT_EQ(BuildAndSimulatePlan(MakeRequest("auto", 4, 8)).status().message(),
            "auto is a search over the catalogue, which MakePlan runs");
  EXPECT_NE(BuildPlan(MakeRequest("optimal", 4, 8)).status().message().find("MakePlan"),
            std::string::npos);
}

}  // namespace
}  // namespace pipeplan
