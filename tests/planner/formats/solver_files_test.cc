// The files a solver process reads and writes (pipeplan/formats/solver_files.h).
#include "pipeplan/formats/solver_files.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pipeplan {
namespace {

TEST(SolverOutcome, ReadsTheSolversResult) {
  const StatusOr<SolverOutcome> outcome = ParseSolverOutcome(
      "status feasible\nobjective 12\nbound 10\nwall_s 3.5\nstopped_by_clock 1\nstarts 0 4\n", 2);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->result, SolverOutcome::Result::kFeasible);
  EXPECT_EQ(outcome->objective, 12);
  EXPECT_EQ(outcome->bound, 10);
  EXPECT_TRUE(outcome->stopped_by_clock);
  EXPECT_EQ(outcome->starts, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(outcome->period, 0);
  EXPECT_FALSE(outcome->period_proven);
  const StatusOr<SolverOutcome> periodic = ParseSolverOutcome(
      "status optimal\nobjective 30\nbound 30\nperiod 3\nperiod_proven 1\nstarts 0 1\n", 2);
  ASSERT_TRUE(periodic.ok()) << periodic.status().message();
  EXPECT_EQ(periodic->period, 3);
  EXPECT_TRUE(periodic->period_proven);

  EXPECT_FALSE(ParseSolverOutcome("objective 12\n", 0).ok());              // no status
  EXPECT_FALSE(ParseSolverOutcome("status optimal\nstarts 0\n", 2).ok());  // too few
  EXPECT_FALSE(ParseSolverOutcome("status solved\n", 0).ok());             // unknown
  const StatusOr<SolverOutcome> infeasible = ParseSolverOutcome("status infeasible\n", 2);
  ASSERT_TRUE(infeasible.ok());
  EXPECT_EQ(infeasible->result, SolverOutcome::Result::kInfeasible);
  EXPECT_FALSE(infeasible->stopped_by_clock);
}

TEST(SolverOutcome, NamesTheMalformedLine) {
  const StatusOr<SolverOutcome> outcome =
      ParseSolverOutcome("status optimal\nobjective twelve\nstarts 0\n", 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_NE(outcome.status().message().find("malformed 'objective' line"), std::string::npos)
      << outcome.status().message();
}

// The instance, written out by hand as pipeplan_solver.py reads it: two ops on two ranks, the
// second after the first plus a delay of 3, one hold, a capacity, no hint, whole step.
TEST(SolverInstanceJson, WritesTheInstanceAsTheSolverReadsIt) {
  SolverInstance instance;
  instance.ranks = 2;
  instance.ops = {{MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(0)), 0, 4, 0},
                  {MakeCompute(ActionKind::kForward, StageId(1), MicrobatchId(0)), 1, 5, 2}};
  instance.precedences = {{0, 1, 3}};
  instance.holds = {{0, 0, -1, 7}};
  instance.capacity = std::vector<int64_t>{10, 10};
  instance.static_memory = {1, 2};
  instance.horizon = 20;
  instance.time_limit_s = 1.5;
  instance.workers = 1;
  EXPECT_EQ(SolverInstanceJson(instance),
            "{\"version\":1,\"ranks\":2,\"ops\":[{\"name\":\"0F0\",\"rank\":0,\"duration\":4,"
            "\"setup\":0},{\"name\":\"1F0\",\"rank\":1,\"duration\":5,\"setup\":2}],"
            "\"precedences\":[[0,1,3]],\"holds\":[[0,0,-1,7]],\"capacity\":[10,10],"
            "\"static\":[1,2],\"hint\":null,\"horizon\":20,\"minimize\":\"makespan\","
            "\"time_limit_s\":1.5,\"workers\":1,\"time_scale\":1,\"memory_scale\":1,"
            "\"exact\":true}\n");
}

}  // namespace
}  // namespace pipeplan
