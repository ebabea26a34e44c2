// Torch CSV export and strict import, both formats. Expected CSV strings are written out by
// hand from torch's grammar or copied from torch's own dumps, not captured from our output.
#include "pipeplan/formats/torch_csv.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/planner/planner.h"

namespace pipeplan {
namespace {

using enum ActionKind;
constexpr TorchCsvFormat kComputeOnly = TorchCsvFormat::kComputeOnly;
constexpr TorchCsvFormat kComputeComms = TorchCsvFormat::kComputeComms;

Action Op(ActionKind kind, int stage, int mb) {
  return MakeCompute(kind, StageId(stage), MicrobatchId(mb));
}

Action Comm(ActionKind kind, int stage, int mb, int peer, bool rollback = false) {
  Action action = Op(kind, stage, mb);
  action.peer = RankId(peer);
  action.rollback = rollback;
  return action;
}

Plan MakePlan(const Topology& topology, std::vector<std::vector<Action>> programs) {
  Plan plan;
  plan.request.topology = topology;
  for (size_t r = 0; r < programs.size(); ++r) {
    plan.programs.push_back({.rank = RankId(static_cast<int>(r)), .actions = programs[r]});
  }
  return plan;
}

// 1F1B on 2 ranks with 2 microbatches, comm inserted.
Plan OneFOneB() {
  return MakePlan({.ranks = 2, .stages_per_rank = 1, .microbatches = 2},
                  {{Op(kForward, 0, 0), Comm(kSendForward, 0, 0, 1), Op(kForward, 0, 1),
                    Comm(kSendForward, 0, 1, 1), Comm(kRecvBackward, 0, 0, 1), Op(kBackward, 0, 0),
                    Comm(kRecvBackward, 0, 1, 1), Op(kBackward, 0, 1)},
                   {Comm(kRecvForward, 1, 0, 0), Op(kForward, 1, 0), Op(kBackward, 1, 0),
                    Comm(kSendBackward, 1, 0, 0), Comm(kRecvForward, 1, 1, 0), Op(kForward, 1, 1),
                    Op(kBackward, 1, 1), Comm(kSendBackward, 1, 1, 0)}});
}

// I/W split with post-validation: rank 1 receives both forwards under rollback.
Plan ZeroBubbleWithPostValidation() {
  return MakePlan(
      {.ranks = 2, .stages_per_rank = 1, .microbatches = 2},
      {{Op(kForward, 0, 0), Comm(kSendForward, 0, 0, 1), Op(kForward, 0, 1),
        Comm(kSendForward, 0, 1, 1), Comm(kRecvPostValidation, 0, 0, 1), Op(kPostValidation, 0, 0),
        Comm(kRecvBackward, 0, 0, 1), Op(kBackwardInput, 0, 0), Comm(kRecvBackward, 0, 1, 1),
        Op(kBackwardInput, 0, 1), Op(kBackwardWeight, 0, 0), Op(kBackwardWeight, 0, 1)},
       {Comm(kRecvForward, 1, 0, 0, true), Op(kForward, 1, 0), Op(kBackwardInput, 1, 0),
        Comm(kSendBackward, 1, 0, 0), Comm(kRecvForward, 1, 1, 0, true), Op(kForward, 1, 1),
        Op(kBackwardInput, 1, 1), Comm(kSendBackward, 1, 1, 0), Op(kBackwardWeight, 1, 0),
        Op(kBackwardWeight, 1, 1), Comm(kSendPostValidation, 1, 0, 0), Op(kPostValidation, 1, 0)}});
}

TEST(TorchCsvExportTest, OneFOneBComputeOnly) {
  const StatusOr<TorchCsvExport> out = ExportTorchCsv(OneFOneB(), TorchCsvFormat::kComputeOnly);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->csv,
            "0F0,0F1,0B0,0B1\r\n"
            "1F0,1B0,1F1,1B1\r\n");
  EXPECT_TRUE(out->notes.empty());
}

TEST(TorchCsvExportTest, OneFOneBComputeComms) {
  const StatusOr<TorchCsvExport> out = ExportTorchCsv(OneFOneB(), TorchCsvFormat::kComputeComms);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD\r\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1REDUCE_GRAD,1SEND_B1\r\n");
  EXPECT_TRUE(out->notes.empty());
}

// dualpipe at P = 2, M = 4: two model copies, stages 0..3.
StatusOr<Plan> DualPipePlan() {
  PlanRequest request;
  request.strategy = "dualpipe";
  request.topology = {
      .ranks = 2, .stages_per_rank = 2, .microbatches = 4, .placement = Placement::kDual};
  return BuildPlan(request);
}

// Torch's grammar has one model copy per stage index; dualpipe's two copies would be read as
// another schedule, so the export refuses and names the variant torch runs.
TEST(TorchCsvExportTest, DualPlacementIsRefusedNamingDualPipeV) {
  const StatusOr<Plan> plan = DualPipePlan();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const TorchCsvFormat format :
       {TorchCsvFormat::kComputeOnly, TorchCsvFormat::kComputeComms}) {
    const StatusOr<TorchCsvExport> out = ExportTorchCsv(*plan, format);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(out.status().message().find("dualpipe-v"), std::string::npos)
        << out.status().message();
  }
}

// The rows pipeplan.torch.schedule loads: a plan of one model copy as the CSV spells it; a
// dual plan's copy B (stages P..2P-1) with the batch's microbatches M/2..M-1, copy A 0..M/2-1.
TEST(TorchActionRowsTest, OneCopyAsTheCsvAndDualWithTheBatchsMicrobatches) {
  const StatusOr<TorchCsvExport> csv = ExportTorchCsv(OneFOneB(), TorchCsvFormat::kComputeComms);
  ASSERT_TRUE(csv.ok()) << csv.status().message();
  EXPECT_EQ(TorchActionRows(OneFOneB(), TorchCsvFormat::kComputeComms), TorchCsvRows(csv->csv));

  const StatusOr<Plan> plan = DualPipePlan();
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::vector<std::vector<std::string>> rows =
      TorchActionRows(*plan, TorchCsvFormat::kComputeOnly);
  ASSERT_EQ(rows.size(), 2U);
  // Rank 0 holds stage 0 (copy A's first) and 3 (copy B's last); rank 1 stages 1 and 2.
  EXPECT_EQ(rows[0].front(), "0F0");
  EXPECT_EQ(rows[1].front(), "2F2");
  std::set<std::pair<int, int>> forwards;  // (stage, microbatch)
  const auto check = [&forwards](const Action& one, const std::string& cell) {
    EXPECT_EQ(one.microbatch.value >= 2, one.stage.value >= 2) << cell;
    if (one.kind == ActionKind::kForward) forwards.emplace(one.stage.value, one.microbatch.value);
  };
  for (const std::vector<std::string>& row : rows) {
    for (const std::string& cell : row) {
      const StatusOr<std::optional<Action>> action = ParseTorchActionToken(cell);
      ASSERT_TRUE(action.ok() && action->has_value()) << cell;
      check(**action, cell);
      for (const Action& sub : (*action)->sub_actions) check(sub, cell);
    }
  }
  // Each stage's forward of each of its copy's two microbatches.
  EXPECT_EQ(forwards, (std::set<std::pair<int, int>>{
                          {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 3}}));
}
TEST(TorchCsvExportTest, ZeroBubbleComputeOnlyLeavesOutPostValidation) {
  const StatusOr<TorchCsvExport> out =
      ExportTorchCsv(ZeroBubbleWithPostValidation(), TorchCsvFormat::kComputeOnly);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->csv,
            "0F0,0F1,0I0,0I1,0W0,0W1\r\n"
            "1F0,1I0,1F1,1I1,1W0,1W1\r\n");
  EXPECT_EQ(out->notes, std::vector<std::string>{
                            "post-validation actions left out: torch's CSV grammar has no such "
                            "action"});
}

TEST(TorchCsvExportTest, ZeroBubbleComputeCommsReducesAfterLastWAndNotesWhatIsLeftOut) {
  const StatusOr<TorchCsvExport> out =
      ExportTorchCsv(ZeroBubbleWithPostValidation(), TorchCsvFormat::kComputeComms);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->csv,
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0I0,0RECV_B1,0I1,0W0,0W1,0REDUCE_GRAD\r\n"
            "1RECV_F0,1F0,1I0,1SEND_B0,1RECV_F1,1F1,1I1,1SEND_B1,1W0,1W1,1REDUCE_GRAD\r\n");
  EXPECT_EQ(out->notes,
            (std::vector<std::string>{
                "post-validation actions left out: torch's CSV grammar has no such action",
                "SEND_PV actions left out: torch's CSV grammar has no such action",
                "RECV_PV actions left out: torch's CSV grammar has no such action",
                "rollback flags left out: torch's CSV grammar cannot mark a RECV_F for rollback",
            }));
}

// Token-level rule check (the order is not a valid schedule): the last backward of stage 0 is
// the backward half of an overlap cell, so its REDUCE_GRAD follows that cell.
TEST(TorchCsvExportTest, ReduceGradFollowsAnOverlapCellHoldingTheLastBackward) {
  const Plan plan =
      MakePlan({.ranks = 1, .stages_per_rank = 2, .microbatches = 2},
               {{Op(kForward, 0, 0), Op(kForward, 0, 1), Op(kBackward, 0, 0),
                 MakeOverlap(Op(kForward, 1, 0), Op(kBackward, 0, 1)), Op(kBackward, 1, 0)}});
  EXPECT_EQ(ExportTorchCsv(plan, TorchCsvFormat::kComputeComms)->csv,
            "0F0,0F1,0B0,(1F0;0B1)OVERLAP_F_B,0REDUCE_GRAD,1B0,1REDUCE_GRAD\r\n");
  EXPECT_EQ(ExportTorchCsv(plan, TorchCsvFormat::kComputeOnly)->csv,
            "0F0,0F1,0B0,(1F0;0B1)OVERLAP_F_B,1B0\r\n");
}

TEST(TorchCsvExportTest, RankWithoutActionsIsAnEmptyRow) {
  const Plan plan =
      MakePlan({.ranks = 2, .stages_per_rank = 1, .microbatches = 1}, {{Op(kForward, 0, 0)}, {}});
  EXPECT_EQ(ExportTorchCsv(plan, TorchCsvFormat::kComputeOnly)->csv, "0F0\r\n\r\n");
}

// ---------------------------------------------------------------------------------------------
// Import.

std::vector<std::vector<Action>> ComputeOnly(const Plan& plan) {
  std::vector<std::vector<Action>> order;
  for (const RankProgram& program : plan.programs) {
    std::vector<Action>& row = order.emplace_back();
    for (const Action& action : program.actions) {
      if (IsCompute(action.kind)) row.push_back(action);
    }
  }
  return order;
}

TEST(TorchCsvImportTest, ImportsOneFOneBAndInfersTheTopology) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv("0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n", kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(
      imported->topology,
      (Topology{
          .ranks = 2, .stages_per_rank = 1, .microbatches = 2, .placement = Placement::kLoop}));
  EXPECT_EQ(imported->order, ComputeOnly(OneFOneB()));
}

TEST(TorchCsvImportTest, ImportThenExportGivesTheSameCsv) {
  const std::string csv =
      "0F0,2F0,0F1,2F1,2B0,(0F2;2B1)OVERLAP_F_B,0B0,0B1,2F2,2B2,0B2\r\n"
      "1F0,3F0,1F1,3I0,3F1,3W0,1I0,3I1,1W0,(1F2;1B1)OVERLAP_F_B,3F2,3B2,3W1,1B2\r\n";
  const StatusOr<TorchCsvImport> imported = ImportTorchCsv(csv, kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(
      imported->topology,
      (Topology{
          .ranks = 2, .stages_per_rank = 2, .microbatches = 3, .placement = Placement::kLoop}));
  const Plan plan = MakePlan(imported->topology, imported->order);
  EXPECT_EQ(ExportTorchCsv(plan, TorchCsvFormat::kComputeOnly)->csv, csv);
}

TEST(TorchCsvImportTest, AcceptsTorchDumpWithIdleSlotsWhitespaceAndBareNewlines) {
  // torch's compute-only dump writes None (an idle slot) as an empty cell.
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv("0F0,0F1,,0B0,,0B1\n,1F0 , 1B0,\t1F1,1B1,\n", kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->topology.ranks, 2);
  EXPECT_EQ(imported->order, ComputeOnly(OneFOneB()));
  const Plan plan = MakePlan(imported->topology, imported->order);
  EXPECT_EQ(ExportTorchCsv(plan, TorchCsvFormat::kComputeOnly)->csv,
            "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n");
}

TEST(TorchCsvImportTest, InfersVPlacement) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0", kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(
      imported->topology,
      (Topology{
          .ranks = 2, .stages_per_rank = 2, .microbatches = 1, .placement = Placement::kVShape}));
}

TEST(TorchCsvImportTest, InfersZigZagPlacementForThreeStagesPerRank) {
  // Rank 0 holds stages 0, 3, 4; rank 1 holds 1, 2, 5.
  const StatusOr<TorchCsvImport> imported = ImportTorchCsv(
      "0F0,3F0,4F0,4B0,3B0,0B0\n1F0,2F0,5F0,5B0,2B0,1B0\n", kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->topology.stages_per_rank, 3);
  EXPECT_EQ(imported->topology.placement, Placement::kVShape);
}

TEST(TorchCsvImportTest, GivenMicrobatchCountWins) {
  const StatusOr<TorchCsvImport> imported = ImportTorchCsv("0F0,0B0\n", kComputeOnly, 4);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->topology.microbatches, 4);
}

// Regression (fuzzing, issue 7): 4 KB of CSV, 4095 empty rows and one cell, declare P=4096
// V=64 M=65536; planning the import allocated 2^34 (stage, microbatch) cells and
// 'pipeplan import' aborted with std::bad_alloc. The topology's cap on P x V x M now refuses
// the inferred topology at import.
TEST(TorchCsvImportTest, OneCellDeclaringAHugeTopologyIsRefused) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(std::string(4095, '\n') + "262143F65535", kComputeOnly, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(),
            "inferred topology: P x V x M = 4096 x 64 x 65536 = 17179869184 (stage, microbatch) "
            "pairs, up to 51539607552 compute actions (F, I and W each), above the cap of "
            "100000000 compute actions");
}

TEST(TorchCsvImportTest, OverlapCellKeepsItsHalves) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n", kComputeOnly, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->order.size(), 1u);
  EXPECT_EQ(
      imported->order[0],
      (std::vector<Action>{Op(kForward, 0, 0), MakeOverlap(Op(kForward, 0, 1), Op(kBackward, 0, 0)),
                           Op(kBackward, 0, 1)}));
}

const std::string kNotCompute =
    " is not a compute action (expected <stage><F|I|B|W><microbatch> such as 3F5, or an overlap "
    "cell such as (0F1;1B0)OVERLAP_F_B)";

// torch 2.11's _PipelineScheduleRuntime._dump_csv() (its default compute_comms format) of
// 1F1B on 2 ranks with 2 microbatches, loaded from "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n".
const std::string kTorchCommsDump =
    "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\r\n"
    "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\r\n";

TEST(TorchCsvImportTest, ComputeCommsKeepsTheComputeOrderOfTorchsDump) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(kTorchCommsDump, kComputeComms, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(
      imported->topology,
      (Topology{
          .ranks = 2, .stages_per_rank = 1, .microbatches = 2, .placement = Placement::kLoop}));
  EXPECT_EQ(imported->order, ComputeOnly(OneFOneB()));
  EXPECT_EQ(imported->notes,
            (std::vector<std::string>{
                "dropped torch's 8 transfers (SEND_F, RECV_F, SEND_B, RECV_B) and 6 bookkeeping "
                "actions (REDUCE_GRAD, UNSHARD, RESHARD): the plan gets its own transfers from "
                "comm insertion"}));
}

TEST(TorchCsvImportTest, ComputeOnlyRefusesTorchsCommsDump) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(kTorchCommsDump, kComputeOnly, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(), "rank 0, cell 0: '0UNSHARD'" + kNotCompute);
}

TEST(TorchCsvImportTest, ComputeCommsReadsOurExportBack) {
  const Plan plan = ZeroBubbleWithPostValidation();
  const StatusOr<TorchCsvImport> imported = ImportTorchCsv(
      ExportTorchCsv(plan, TorchCsvFormat::kComputeComms)->csv, kComputeComms, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->order, ComputeOnly(plan));
}

TEST(TorchCsvImportTest, ComputeCommsWithoutTransfersHasNoNote) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv("0F0,0B0\n", kComputeComms, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_TRUE(imported->notes.empty());
}

struct CsvErrorCase {
  std::string name;
  std::string csv;
  std::optional<int> microbatches;
  std::string expected;
  TorchCsvFormat format = TorchCsvFormat::kComputeOnly;
};

class TorchCsvImportErrorTest : public ::testing::TestWithParam<CsvErrorCase> {};

TEST_P(TorchCsvImportErrorTest, NamesTheCellAndTheProblem) {
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(GetParam().csv, GetParam().format, GetParam().microbatches);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(imported.status().message(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, TorchCsvImportErrorTest,
    ::testing::Values(
        CsvErrorCase{"Empty", "", std::nullopt, "empty input: expected one row per rank"},
        CsvErrorCase{"OnlyEmptyCells", ",\r\n\r\n", std::nullopt,
                     "no actions in 2 row(s): every cell is empty"},
        CsvErrorCase{"CommToken", "0F0,0B0\n1F0,1B0,1SEND_B0\n", std::nullopt,
                     "rank 1, cell 2: '1SEND_B0' is a communication action; import expects "
                     "torch's compute-only format"},
        CsvErrorCase{"CommTokenAfterIdleSlots", "0F0,,,,2SEND_F0\n", std::nullopt,
                     "rank 0, cell 4: '2SEND_F0' is a communication action; import expects "
                     "torch's compute-only format"},
        CsvErrorCase{"ReduceGrad", "0F0,0B0,0REDUCE_GRAD\n", std::nullopt,
                     "rank 0, cell 2: '0REDUCE_GRAD' is a gradient-reduction action; import "
                     "expects torch's compute-only format"},
        CsvErrorCase{"LegacyBW", "2F0,2I0,2BW0\n", std::nullopt,
                     "rank 0, cell 2: '2BW0' is torch's legacy full-backward token; use '2B0'"},
        CsvErrorCase{"TrailingGarbage", "0F0,1F0x\n", std::nullopt,
                     "rank 0, cell 1: '1F0x'" + kNotCompute},
        CsvErrorCase{"UnknownKind", "0X0\n", std::nullopt, "rank 0, cell 0: '0X0'" + kNotCompute},
        CsvErrorCase{"NoStage", "F0\n", std::nullopt, "rank 0, cell 0: 'F0'" + kNotCompute},
        CsvErrorCase{"QuotedCell", "\"0F0\"\n", std::nullopt,
                     "rank 0, cell 0: '\"0F0\"'" + kNotCompute},
        CsvErrorCase{"PostValidationToken", "0F0,0PV\n", std::nullopt,
                     "rank 0, cell 1: '0PV'" + kNotCompute},
        CsvErrorCase{"MissingMicrobatch", "0F0,0B\n", std::nullopt,
                     "rank 0, cell 1: '0B' has no microbatch"},
        CsvErrorCase{"NegativeStage", "-1F0\n", std::nullopt,
                     "rank 0, cell 0: '-1F0' has a negative stage"},
        CsvErrorCase{"NegativeMicrobatch", "0F0\n1F-1\n", std::nullopt,
                     "rank 1, cell 0: '1F-1' has a negative microbatch"},
        CsvErrorCase{"OverflowingMicrobatch", "0F99999999999\n", std::nullopt,
                     "rank 0, cell 0: '0F99999999999' has a microbatch too large for a 32-bit "
                     "integer"},
        CsvErrorCase{"OverflowingStage", "4294967296B0\n", std::nullopt,
                     "rank 0, cell 0: '4294967296B0' has a stage too large for a 32-bit "
                     "integer"},
        CsvErrorCase{"MicrobatchOutOfRange", "0F0,0F1,0F9\n", 8,
                     "rank 0, cell 2: microbatch 9 out of range 0..7"},
        CsvErrorCase{"OverlapMicrobatchOutOfRange", "0F0,(0F2;0B0)OVERLAP_F_B\n", 2,
                     "rank 0, cell 1: microbatch 2 out of range 0..1"},
        CsvErrorCase{"ZeroMicrobatchesGiven", "0F0\n", 0, "microbatches must be >= 1, got 0"},
        CsvErrorCase{"OverlapWithOneAction", "(0F1)OVERLAP_F_B\n", std::nullopt,
                     "rank 0, cell 0: '(0F1)OVERLAP_F_B' must hold exactly two actions, a "
                     "forward and a backward"},
        CsvErrorCase{"OverlapBackwardFirst", "(0B0;0F1)OVERLAP_F_B\n", std::nullopt,
                     "rank 0, cell 0: '(0B0;0F1)OVERLAP_F_B' must hold a forward, then a "
                     "backward (B, I or W)"},
        CsvErrorCase{"OverlapHoldingComm", "(0F1;0SEND_B0)OVERLAP_F_B\n", std::nullopt,
                     "rank 0, cell 0: '(0F1;0SEND_B0)OVERLAP_F_B' must hold a forward, then a "
                     "backward (B, I or W)"},
        CsvErrorCase{"CommsOverlapHoldingComm", "(0F1;0SEND_B0)OVERLAP_F_B\n", std::nullopt,
                     "rank 0, cell 0: '(0F1;0SEND_B0)OVERLAP_F_B' must hold a forward, then a "
                     "backward (B, I or W)",
                     kComputeComms},
        CsvErrorCase{"CommsTransferWithoutMicrobatch", "0F0,0SEND_F\n1F0\n", std::nullopt,
                     "rank 0, cell 1: '0SEND_F' has no microbatch", kComputeComms},
        CsvErrorCase{"CommsBookkeepingWithMicrobatch", "0F0,0B0,0REDUCE_GRAD0\n", std::nullopt,
                     "rank 0, cell 2: '0REDUCE_GRAD0' must not have a microbatch (torch writes "
                     "'0REDUCE_GRAD')",
                     kComputeComms},
        CsvErrorCase{"CommsStageOfAnotherRank", "0F0,0B0\n1F0,0RECV_F0,1B0\n", std::nullopt,
                     "rank 1, cell 1: stage 0 already appears on rank 0", kComputeComms},
        CsvErrorCase{"CommsStageBeyondTheComputeStages", "0F0,0B0,1SEND_F0\n", std::nullopt,
                     "rank 0, cell 2: stage 1 is beyond the last stage of the compute actions (0)",
                     kComputeComms},
        CsvErrorCase{"CommsMicrobatchOutOfRangeGiven", "0F0,0SEND_F5\n1F0\n", 2,
                     "rank 0, cell 1: microbatch 5 out of range 0..1", kComputeComms},
        CsvErrorCase{"CommsMicrobatchOutOfRangeInferred", "0F0,0B0,0RECV_B3\n", std::nullopt,
                     "rank 0, cell 2: microbatch 3 out of range 0..0", kComputeComms},
        CsvErrorCase{"CommsOnlyTransfers", "0SEND_F0\n1RECV_F0\n", std::nullopt,
                     "no actions in 2 row(s): no compute action", kComputeComms},
        CsvErrorCase{"CommsUnknownKind", "0F0,0SEND_X0\n", std::nullopt,
                     "rank 0, cell 1: '0SEND_X0'" + kNotCompute, kComputeComms},
        CsvErrorCase{"OverlapWithoutSuffix", "(0F1;0B0)\n", std::nullopt,
                     "rank 0, cell 0: '(0F1;0B0)'" + kNotCompute},
        CsvErrorCase{"StagesDoNotDivide", "0F0,2F0\n1F0\n", std::nullopt,
                     "3 stages (0..2) do not divide evenly over 2 ranks (rows)"},
        CsvErrorCase{"StageOnTwoRanks", "0F0,1F0\n1B0\n", std::nullopt,
                     "rank 1, cell 0: stage 1 already appears on rank 0"},
        CsvErrorCase{"NeitherLoopNorV", "0F0,1F0\n2F0,3F0\n", std::nullopt,
                     "cannot infer placement: stage 1 is on rank 0 but loop placement puts it "
                     "on rank 1; stage 1 is on rank 0 but v placement puts it on rank 1"},
        CsvErrorCase{"LargestMicrobatchId", "0F2147483647\n", std::nullopt,
                     "inferred topology: microbatches must be in 1..65536, got 2147483647"},
        CsvErrorCase{"TooManyStagesPerRank", "0F0,255F0\n", std::nullopt,
                     "inferred topology: stages per rank must be in 1..64, got 256"}),
    [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace pipeplan
