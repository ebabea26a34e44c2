// compare --auto: auto takes compare's rows for the candidates they equal, so that no plan the
// command makes is planned and simulated twice.
#include "pipeplan/cli/comparison.h"

#include <gtest/gtest.h>

#include <vector>

#include "pipeplan/simulation/simulator.h"
#include "test_support.h"

namespace pipeplan::cli {
namespace {

int RowsAutoTakes(const std::vector<ComparisonRow>& rows, const AutoResult& result) {
  int taken = 0;
  for (const AutoCandidate& candidate : result.candidates) {
    for (const ComparisonRow& row : rows) {
      if (row.made.has_value() && row.request == candidate.request) {
        ++taken;
        break;
      }
    }
  }
  return taken;
}

TEST(CompareWithAuto, AutoTakesTheRowsPlansAndSimulatesOnlyTheOtherCandidates) {
  const PlanRequest base = testing::MakeRequest("1f1b", 4, 8, 1, 1, 1.2, 0.8, 0.1);
  const std::vector<ComparisonRow> rows = RunComparison(base, 2);
  int alone_count = 0;
  int with_rows_count = 0;
  StatusOr<AutoResult> alone = InvalidArgument("not run");
  StatusOr<AutoResult> with_rows = InvalidArgument("not run");
  {
    const SimulationCount count;
    alone = RunAuto(base);
    alone_count = count.value();
  }
  {
    const SimulationCount count;
    with_rows = RunAuto(base, rows);
    with_rows_count = count.value();
  }
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_TRUE(with_rows.ok()) << with_rows.status().message();

  // The same search: the same candidates in the same order, the same figures, the same pick.
  ASSERT_EQ(with_rows->candidates.size(), alone->candidates.size());
  for (size_t i = 0; i < alone->candidates.size(); ++i) {
    const AutoCandidate& a = alone->candidates[i];
    const AutoCandidate& b = with_rows->candidates[i];
    EXPECT_EQ(b.request, a.request) << i;
    EXPECT_EQ(b.makespan, a.makespan) << a.request.strategy;
    EXPECT_EQ(b.peak_memory, a.peak_memory) << a.request.strategy;
    EXPECT_EQ(b.status.message(), a.status.message()) << a.request.strategy;
  }
  EXPECT_EQ(with_rows->best.plan, alone->best.plan);
  EXPECT_EQ(with_rows->best.timeline, alone->best.timeline);

  // Every catalogue row at V = 1 and V = 2 is one of auto's candidates (the group-size and
  // memory-step strategies' rows excepted: auto plans their settings instead); each such
  // candidate costs no simulation, each other one its own.
  const int taken = RowsAutoTakes(rows, *with_rows);
  EXPECT_GE(taken, 10);
  EXPECT_EQ(with_rows_count, alone_count - taken);
}

}  // namespace
}  // namespace pipeplan::cli
