// The Python entry point's work without LibTorch: a request in, the torch CSV cells per rank,
// the metrics JSON and the notes out, with the CLI's checks. Expected rows are written from
// the 1F1B rule (docs/strategies.md), not captured from our output.
#include "pipeplan/torch_ext/plan_op.h"

#include <gtest/gtest.h>

#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace pipeplan::torch_ext {
namespace {

PlanOpRequest OneFOneB() { return {.strategy = "1f1b", .ranks = 2, .microbatches = 2}; }

TEST(PlanOpTest, GivesTheTorchCsvCellsPerRankAndTheMetrics) {
  const StatusOr<PlanOpResult> result = RunPlanOp(OneFOneB());
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->actions, (std::vector<std::vector<std::string>>{{"0F0", "0F1", "0B0", "0B1"},
                                                                    {"1F0", "1B0", "1F1", "1B1"}}));
  // (M + P - 1)(F + B) with the default F=1, B=2.
  EXPECT_TRUE(result->metrics_json.starts_with(
      R"({"strategy":"1f1b","ranks":2,"stages_per_rank":1,"microbatches":2,"makespan":9,)"))
      << result->metrics_json;
  EXPECT_FALSE(result->metrics_json.ends_with('\n'));
  EXPECT_TRUE(result->notes.empty());
}

TEST(PlanOpTest, CommsFormatAddsTransfersAndReduceGrad) {
  PlanOpRequest request = OneFOneB();
  request.format = TorchCsvFormat::kComputeComms;
  const StatusOr<PlanOpResult> result = RunPlanOp(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->actions.size(), 2u);
  EXPECT_EQ(result->actions[0].front(), "0F0");
  EXPECT_EQ(result->actions[0][1], "0SEND_F0");
  EXPECT_EQ(result->actions[0].back(), "0REDUCE_GRAD");
}

TEST(PlanOpTest, CostsChangeTheMetrics) {
  PlanOpRequest request = OneFOneB();
  request.forward = 0.5;
  request.backward = 1.25;
  const StatusOr<PlanOpResult> result = RunPlanOp(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_NE(result->metrics_json.find(R"("makespan":5.25,)"), std::string::npos)
      << result->metrics_json;  // 3 * (0.5 + 1.25)
}

TEST(PlanOpTest, ReceiveOverheadDelaysEachReceive) {
  PlanOpRequest request = {.strategy = "1f1b", .ranks = 2, .microbatches = 1};
  request.comm = 0.5;
  const StatusOr<PlanOpResult> without = RunPlanOp(request);
  request.receive_overhead = 3;
  const StatusOr<PlanOpResult> with = RunPlanOp(request);
  ASSERT_TRUE(without.ok()) << without.status().message();
  ASSERT_TRUE(with.ok()) << with.status().message();
  // F=1, B=2. Without: F on rank 1 at 1.5, its B ends at 4.5, rank 0's B starts at 5 -> 7.
  // With o=3: rank 1's receive, posted at 0, ends at 3; its B ends at 6; rank 0's, posted
  // at 1 (after its F), ends at max(1 + 3, 6 + 0.5) = 6.5 -> 8.5.
  EXPECT_NE(without->metrics_json.find(R"("makespan":7,)"), std::string::npos)
      << without->metrics_json;
  EXPECT_NE(with->metrics_json.find(R"("makespan":8.5,)"), std::string::npos) << with->metrics_json;
}

// The solver-made strategies, refused by the op before: CP-SAT runs as for `pipeplan plan`.
TEST(PlanOpTest, PlansASolverMadeStrategyAsTheCliDoes) {
  PlanOpRequest request = {.strategy = "optimal", .ranks = 2, .microbatches = 2};
  const StatusOr<PlanOpResult> result = RunPlanOp(request);
  if (!result.ok() && result.status().message().find("setup_solver.sh") != std::string::npos) {
    GTEST_SKIP() << "no OR-Tools solver here: " << result.status().message();
  }
  ASSERT_TRUE(result.ok()) << result.status().message();
  // F = I = W = 1 at P = M = 2: rank 1 waits 1 for rank 0's first F, then runs its 6 ops
  // without a gap (F0 I0 F1 I1 W0 W1); rank 0 (F0 F1, idle while rank 1's I0 runs, I0 W0 I1
  // W1) ends with it: 7, the bound.
  EXPECT_NE(result->metrics_json.find(R"("makespan":7,)"), std::string::npos)
      << result->metrics_json;
  ASSERT_FALSE(result->notes.empty());
  // The solver's verdict in the words `pipeplan plan` prints.
  EXPECT_EQ(result->notes.back().rfind("optimal: makespan 7, optimal", 0), 0u)
      << result->notes.back();
}

TEST(PlanOpTest, PostValidationIsLeftOutWithNotes) {
  // For torch's runtime, the op's default, a plan with post-validation is refused.
  const StatusOr<PlanOpResult> refused =
      RunPlanOp({.strategy = "zbv", .ranks = 4, .microbatches = 8, .post_validation = true});
  EXPECT_EQ(refused.status().message(),
            "runtime torch cannot run zbv: torch's runtime has no post-validation step "
            "(--post-validation)");
  const StatusOr<PlanOpResult> result = RunPlanOp({.strategy = "zbv",
                                                   .ranks = 4,
                                                   .microbatches = 8,
                                                   .post_validation = true,
                                                   .runtime = "any"});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->notes, (std::vector<std::string>{
                               "post-validation actions left out: torch's CSV grammar has no "
                               "such action"}));
  EXPECT_NE(result->metrics_json.find(R"("post_validation":true,"rollback_receives":9)"),
            std::string::npos)
      << result->metrics_json;
}

struct ErrorCase {
  std::string name;
  PlanOpRequest request;
  std::string expected;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class PlanOpErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(PlanOpErrorTest, ReadsLikeTheCli) {
  const StatusOr<PlanOpResult> result = RunPlanOp(GetParam().request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Requests, PlanOpErrorTest,
    ::testing::Values(
        ErrorCase{"NoRanks",
                  {.strategy = "1f1b", .ranks = 0, .microbatches = 2},
                  "--ranks must be >= 1, got 0"},
        ErrorCase{"NegativeCost",
                  {.strategy = "1f1b", .ranks = 2, .microbatches = 2, .forward = -1.0},
                  "--forward must be >= 0, got -1"},
        ErrorCase{"CostsFileAndDurations",
                  {.strategy = "1f1b",
                   .ranks = 2,
                   .microbatches = 2,
                   .forward = 1.0,
                   .costs_file = "costs.txtpb"},
                  "--costs cannot be combined with --forward, --backward, --backward-input, "
                  "--backward-weight, --overlap, --comm or --receive-overhead"},
        ErrorCase{"MissingCostsFile",
                  {.strategy = "1f1b",
                   .ranks = 2,
                   .microbatches = 2,
                   .costs_file = "/nonexistent/costs.txtpb"},
                  "cannot read '/nonexistent/costs.txtpb': No such file or directory"},
        // Values Python can pass that no flag text could: checked all the same.
        ErrorCase{"RanksBeyondInt",
                  {.strategy = "1f1b", .ranks = 3000000000, .microbatches = 2},
                  "--ranks: integer out of range: '3000000000'"},
        ErrorCase{"InfiniteCost",
                  {.strategy = "1f1b",
                   .ranks = 2,
                   .microbatches = 2,
                   .forward = std::numeric_limits<double>::infinity()},
                  "--forward: expected a number, got 'inf'"},
        ErrorCase{"ImpossibleRequest",
                  {.strategy = "zb-h2", .ranks = 4, .microbatches = 4},
                  "zb-h2 needs at least 2P microbatches: P=4 needs M >= 8, got M=4"}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(PlanOpTest, FormatNames) {
  EXPECT_EQ(ParseTorchCsvFormat("torch-csv").value(), TorchCsvFormat::kComputeOnly);
  EXPECT_EQ(ParseTorchCsvFormat("torch-csv-comms").value(), TorchCsvFormat::kComputeComms);
  EXPECT_EQ(ParseTorchCsvFormat("json").status().message(),
            "unknown format 'json' (expected torch-csv or torch-csv-comms)");
}

}  // namespace
}  // namespace pipeplan::torch_ext
