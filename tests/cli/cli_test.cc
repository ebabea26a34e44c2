// End-to-end tests of the pipeplan command: the plan -> simulate -> export -> import round
// trip, reports, compare, demo and auto. Malformed inputs: cli_error_test.cc.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::cli_test {
namespace {

TEST(CliTest, NoCommandIsAUsageError) {
  ScratchDir dir;
  const RunResult result = RunPipeplan({}, dir.path());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(result.err.starts_with("pipeplan: error: missing command\nusage: pipeplan"))
      << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(CliTest, HelpForToolAndEverySubcommand) {
  ScratchDir dir;
  const RunResult top = RunPipeplan({"--help"}, dir.path());
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_TRUE(top.out.starts_with("usage: pipeplan <command>")) << top.out;
  EXPECT_EQ(top.err, "");
  for (const std::string command : {"plan", "simulate", "export", "import", "compare", "run",
                                    "diff", "profile", "calibrate", "demo"}) {
    SCOPED_TRACE(command);
    for (const std::string flag : {"--help", "-h"}) {
      const RunResult result = RunPipeplan({command, flag}, dir.path());
      EXPECT_EQ(result.exit_code, 0);
      EXPECT_TRUE(result.out.starts_with("usage: pipeplan " + command)) << result.out;
      EXPECT_NE(result.out.find("Example"), std::string::npos);
      EXPECT_EQ(result.err, "");
    }
    const RunResult via_help = RunPipeplan({"help", command}, dir.path());
    EXPECT_EQ(via_help.exit_code, 0);
    EXPECT_TRUE(via_help.out.starts_with("usage: pipeplan " + command));
  }
  // The strategy list in plan --help comes from the catalogue, auto last.
  const RunResult plan_help = RunPipeplan({"plan", "--help"}, dir.path());
  for (const Strategy& strategy : AllStrategies()) {
    EXPECT_FALSE(LineStartingWith(plan_help.out, {std::string(strategy.name)}).empty())
        << strategy.name;
  }
  EXPECT_FALSE(LineStartingWith(plan_help.out, {"auto", "any"}).empty()) << plan_help.out;
  for (const char* flag : {"--post-validation", "--overlap T", "--memory-limit"}) {
    EXPECT_NE(plan_help.out.find(flag), std::string::npos) << flag;
  }
  const RunResult compare_help = RunPipeplan({"compare", "--help"}, dir.path());
  for (const char* flag : {"--auto", "--post-validation", "--overlap T"}) {
    EXPECT_NE(compare_help.out.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(plan_help.out.find("@STRATEGIES@"), std::string::npos);
  EXPECT_TRUE(dir.List().empty());
}

TEST(CliTest, PlanSimulateExportImportRoundTrip) {
  ScratchDir dir;
  const RunResult plan =
      RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--forward",
                   "1", "--backward", "2", "-o", "plan.pb"},
                  dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err, "");
  EXPECT_TRUE(dir.Exists("plan.pb"));

  const RunResult sim = RunPipeplan({"simulate", "plan.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.err, "");
  // (M + P - 1)(F + B) = 11 * 3.
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 33);
  EXPECT_GE(JsonNumber(sim.out, "zb_bubble_rate"), 0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "bubble_fraction_max"), 9.0 / 33.0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "bubble_fraction_mean"), 9.0 / 33.0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "lower_bound"), 24);
  EXPECT_EQ(JsonNumbers(sim.out, "busy"), std::vector<double>({24, 24, 24, 24}));
  const std::vector<double> peak = JsonNumbers(sim.out, "peak_activation_memory");
  ASSERT_EQ(peak.size(), 4u);
  EXPECT_DOUBLE_EQ(peak[0], 4);  // rank 0 of 1F1B holds P microbatches
  EXPECT_EQ(std::count(sim.out.begin(), sim.out.end(), '\n'), 1) << "one JSON object, one line";

  const RunResult csv =
      RunPipeplan({"export", "plan.pb", "--format", "torch-csv", "-o", "schedule.csv"}, dir.path());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string rows = dir.Read("schedule.csv");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 4) << rows;
  EXPECT_TRUE(rows.starts_with("0F0,")) << rows;

  const RunResult imported =
      RunPipeplan({"import", "--format", "torch-csv", "schedule.csv", "--microbatches", "8",
                   "--forward", "1", "--backward", "2", "-o", "imported.textproto"},
                  dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(dir.Read("imported.textproto").find("imported"), std::string::npos);

  const RunResult resim = RunPipeplan({"simulate", "imported.textproto", "--json"}, dir.path());
  ASSERT_EQ(resim.exit_code, 0) << resim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(resim.out, "makespan"), 33);
  EXPECT_EQ(JsonNumbers(resim.out, "busy"), JsonNumbers(sim.out, "busy"));
  EXPECT_NE(resim.out.find("\"strategy\":\"imported\""), std::string::npos) << resim.out;
}

TEST(CliTest, ImportWithoutCostFlagsUsesDefaultCosts) {
  ScratchDir dir;
  dir.Write("s.csv", "0F0,0B0\n");
  const RunResult imported = RunPipeplan(
      {"import", "--format", "torch-csv", "s.csv", "--strategy-name", "mine", "-o", "p.json"},
      dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_TRUE(dir.Read("p.json").starts_with("{"));
  const RunResult sim = RunPipeplan({"simulate", "p.json", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 3);  // F=1 + B=2
  EXPECT_NE(sim.out.find("\"strategy\":\"mine\""), std::string::npos) << sim.out;
}

TEST(CliTest, ImportTorchCsvCommsDropsTorchsTransfersWithANote) {
  ScratchDir dir;
  // What torch 2.11's runtime dumps by default (_dump_csv(), compute_comms) for 1F1B, P=2 M=2.
  dir.Write(
      "dump.csv",
      "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\r\n"
      "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\r\n");
  const RunResult imported =
      RunPipeplan({"import", "--format", "torch-csv-comms", "dump.csv", "-o", "p.pb"}, dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("note: dropped torch's 8 transfers (SEND_F, RECV_F, SEND_B, "
                              "RECV_B) and 6 bookkeeping actions"),
            std::string::npos)
      << imported.err;
  const RunResult sim = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 9);  // (M + P - 1)(F + B)
  const RunResult plain =
      RunPipeplan({"import", "--format", "torch-csv", "dump.csv", "-o", "q.pb"}, dir.path());
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("rank 0, cell 0: '0UNSHARD' is not a compute action"), std::string::npos)
      << plain.err;
}

TEST(CliTest, PlanOutputFormatFollowsExtension) {
  ScratchDir dir;
  const std::vector<std::string> base = {"plan", "--strategy",     "gpipe", "--ranks",
                                         "2",    "--microbatches", "2"};
  for (const std::string name : {"p.pb", "p.json", "p.textproto", "p.txt"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"-o", name});
    const RunResult result = RunPipeplan(args, dir.path());
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.err;
    EXPECT_NE(result.out.find("to " + name), std::string::npos) << result.out;
  }
  EXPECT_TRUE(dir.Read("p.json").starts_with("{"));
  EXPECT_NE(dir.Read("p.textproto").find("programs {"), std::string::npos);
  EXPECT_EQ(dir.Read("p.txt"), dir.Read("p.textproto"));
  EXPECT_NE(dir.Read("p.pb"), dir.Read("p.textproto"));

  // Without -o: text format on stdout, identical to the file.
  const RunResult to_stdout = RunPipeplan(base, dir.path());
  ASSERT_EQ(to_stdout.exit_code, 0);
  EXPECT_EQ(to_stdout.out, dir.Read("p.textproto"));

  // Every encoding simulates the same.
  std::string first;
  for (const std::string name : {"p.pb", "p.json", "p.textproto"}) {
    const RunResult sim = RunPipeplan({"simulate", name, "--json"}, dir.path());
    ASSERT_EQ(sim.exit_code, 0) << name << ": " << sim.err;
    if (first.empty()) first = sim.out;
    EXPECT_EQ(sim.out, first) << name;
  }
}

TEST(CliTest, CostFlagsAndEqualsSyntax) {
  ScratchDir dir;
  // B defaults to I + W.
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy=1f1b", "--ranks=2", "--microbatches=3", "--forward=2",
       "--backward-input=1.5", "--backward-weight", "0.5", "--comm", "0.25", "-o", "p.json"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult sim = RunPipeplan({"simulate", "p.json", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  // Every rank runs 3 F (2) and 3 B (1.5 + 0.5).
  EXPECT_EQ(JsonNumbers(sim.out, "busy"), std::vector<double>({12, 12}));
  // Critical path of one microbatch: F, comm, F, B, comm, B = 2 + .25 + 2 + 2 + .25 + 2.
  EXPECT_GE(JsonNumber(sim.out, "makespan"), 12 + 4 + 0.5);
}

// 1F1B P=2 M=1, F=1, B=2, latency 0.5 (makespan 7) with a receive overhead of 3: the first
// stage-1 receive, posted at 0, ends at 3 instead of 1.5 (simulator_test works it out).
TEST(CliTest, ReceiveOverheadFlagReachesThePlanAndTheSimulation) {
  ScratchDir dir;
  const RunResult plan =
      RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "1", "--comm",
                   "0.5", "--receive-overhead", "3", "-o", "p.txtpb"},
                  dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(dir.Read("p.txtpb").find("receive_overhead: 3"), std::string::npos);
  const RunResult sim = RunPipeplan({"simulate", "p.txtpb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 8.5);
}

TEST(CliTest, SimulateWithOtherCostsKeepsTheActionsAndWritesThoseCosts) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan(
                {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "p.pb"},
                dir.path())
                .exit_code,
            0);
  // 1F1B with uniform costs and no comm: (M + P - 1) (F + B) = 3 * (2 + 4).
  dir.Write("costs.textproto",
            "stages { forward: 2 backward: 4 backward_input: 2 backward_weight: 2 }\n");
  const RunResult sim = RunPipeplan(
      {"simulate", "p.pb", "--costs", "costs.textproto", "--json", "--timeline", "s.json"},
      dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 18);
  EXPECT_NE(dir.Read("s.json").find("\"forward\": 2"), std::string::npos);
  const RunResult plain = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(plain.out, "makespan"), 9);  // the plan's own F=1, B=2

  dir.Write("bad.textproto", "stages { forward: -1 }\n");
  const RunResult bad = RunPipeplan({"simulate", "p.pb", "--costs", "bad.textproto"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.textproto"), std::string::npos) << bad.err;
}

// A cost file of another cut of the model (2 stages, e.g. from a V = 1 profile at P = 2) on a
// plan of 4: cut again by depth, and said so. Each old stage of F=4, B=8 is two of F=2, B=4.
TEST(CliTest, SimulateCutsPerStageCostsOfAnotherV) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan(
                {"plan", "--strategy", "zbv", "--ranks", "2", "--microbatches", "4", "-o", "p.pb"},
                dir.path())
                .exit_code,
            0);
  const std::string stage =
      "stages { forward: 4 backward: 8 backward_input: 4 backward_weight: 4 }\n";
  dir.Write("two.textproto", stage + stage);
  dir.Write("one.textproto",
            "stages { forward: 2 backward: 4 backward_input: 2 backward_weight: 2 }\n");
  const RunResult cut = RunPipeplan({"simulate", "p.pb", "--costs", "two.textproto"}, dir.path());
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(cut.err,
            "note: the 2 per-stage entries of the costs were cut by depth into the 4 stages of zbv "
            "at V=2 (an estimate: profile a plan with that V to measure them)\n");
  const RunResult uniform =
      RunPipeplan({"simulate", "p.pb", "--costs", "one.textproto"}, dir.path());
  ASSERT_EQ(uniform.exit_code, 0) << uniform.err;
  EXPECT_EQ(cut.out, uniform.out);
  EXPECT_EQ(uniform.err, "");
}

// The H200 calibration (P = 4; its rank 0 held 32 MiB more of its own, from taking turns on one
// GPU) for a plan at P = 8: every rank counts the largest rank's static memory, and the note
// says so; at P = 4 no note.
TEST(CliTest, PlanAtAnotherPCountsTheLargestRanksStaticMemory) {
  ScratchDir dir;
  const std::string costs =
      std::string(PIPEPLAN_TEST_DATA_DIR) + "/../../examples/h200_zbv_costs.json";
  const RunResult at_8 = RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "8", "--microbatches",
                                      "16", "--costs", costs, "-o", "p8.pb"},
                                     dir.path());
  ASSERT_EQ(at_8.exit_code, 0) << at_8.err;
  EXPECT_NE(at_8.err.find("note: the static memory measured on 4 ranks counts its largest, "
                          "67.0 MiB (70255616 B), for each of the 8 ranks of zbv: an upper "
                          "bound (profile at that P to measure each)\n"),
            std::string::npos)
      << at_8.err;
  const RunResult at_4 = RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches",
                                      "8", "--costs", costs, "-o", "p4.pb"},
                                     dir.path());
  ASSERT_EQ(at_4.exit_code, 0) << at_4.err;
  EXPECT_EQ(at_4.err.find("static memory measured on"), std::string::npos) << at_4.err;
}

// A calibrated file of a V shape's eight stages (one chain of the model) planned as dualpipe at
// P = 4, whose eight stages are two model copies: each copy is the whole model, its stage j
// two of the file's (as a file of four stages of their sums would give), and said so. Before,
// the file's halves were taken as the two copies: each a model of half the depth.
TEST(CliTest, PlanCutsAChainsFiguresForDualPipesTwoCopies) {
  ScratchDir dir;
  std::string eight;
  std::string four;
  for (int s = 0; s < 8; ++s) {
    eight += "stages { forward: " + std::to_string(1 + s) + " backward: 2 }\n";
  }
  for (int j = 0; j < 4; ++j) {
    four += "stages { forward: " + std::to_string(3 + 4 * j) + " backward: 4 }\n";
  }
  dir.Write("eight.textproto", eight);
  dir.Write("four.textproto", four);
  const auto plan = [&](const std::string& costs, const std::string& out) {
    return RunPipeplan({"plan", "--strategy", "dualpipe", "--ranks", "4", "--microbatches", "8",
                        "--costs", costs, "-o", out},
                       dir.path());
  };
  const RunResult from_eight = plan("eight.textproto", "eight.pb");
  ASSERT_EQ(from_eight.exit_code, 0) << from_eight.err;
  EXPECT_EQ(from_eight.err,
            "note: the 8 per-stage entries of the costs were cut by depth into the 8 stages of "
            "dualpipe at V=2 (two model copies, each the whole model) (an estimate: profile a "
            "plan with that V to measure them)\n"
            "note: dualpipe's step ends with each rank r and rank P-1-r adding each other's "
            "gradients of their two stages (the two model copies' sum): the makespan leaves it "
            "out, as a measured timeline's does (first action to last)\n");
  const RunResult from_four = plan("four.textproto", "four.pb");
  ASSERT_EQ(from_four.exit_code, 0) << from_four.err;
  const RunResult a = RunPipeplan({"simulate", "eight.pb", "--json"}, dir.path());
  const RunResult b = RunPipeplan({"simulate", "four.pb", "--json"}, dir.path());
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_DOUBLE_EQ(JsonNumber(a.out, "makespan"), JsonNumber(b.out, "makespan"));
  // Rank r runs depths r and 3 - r (F summing to 18) for four microbatches each: 72 of F
  // alone (the halves taken as copies gave every rank 36).
  EXPECT_GT(JsonNumber(a.out, "makespan"), 72);
}

// simulate --runtime/--export: usage errors exit 2 naming the flag; an export torch cannot
// run (a dual placement) exits 1 naming it; nothing is written either way.
TEST(CliTest, SimulateOnTorchsRuntimeRefusesWhatItCannotModel) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "dualpipe", "--ranks", "2", "--stages-per-rank", "2",
                         "--microbatches", "4", "-o", "dual.pb"},
                        dir.path())
                .exit_code,
            0);
  struct Case {
    std::vector<std::string> flags;
    int exit_code;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--runtime", "tarch"}, 2, "--runtime: unknown runtime 'tarch' (known: "},
      {{"--runtime", "megatron"}, 2, "--runtime megatron: there is no model of Megatron-LM's"},
      {{"--export", "torch-csv"}, 2, "--export: only with --runtime torch"},
      {{"--runtime", "torch", "--export", "csv"}, 2, "--export: unknown format 'csv'"},
      {{"--runtime", "torch"},
       1,
       "--export torch-csv-comms: torch's runtime has one model copy per stage index: a "
       "dual-placement plan (dualpipe) does not run there"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"simulate", "dual.pb", "--svg", "t.svg"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const RunResult run = RunPipeplan(args, dir.path());
    EXPECT_EQ(run.exit_code, c.exit_code) << run.err;
    EXPECT_NE(run.err.find("pipeplan simulate: error: " + c.error), std::string::npos) << run.err;
    EXPECT_FALSE(dir.Exists("t.svg"));
  }
}

TEST(CliTest, SimulateTableAndReports) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zb-h1", "--ranks", "4", "--microbatches", "8", "-o",
                         "zb.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult sim = RunPipeplan({"simulate", "zb.pb", "--trace", "out/trace.json", "--svg",
                                     "out/t.svg", "--html", "out/report.html"},
                                    dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.err, "");
  EXPECT_NE(sim.out.find("makespan"), std::string::npos) << sim.out;
  EXPECT_NE(sim.out.find("zb_bubble_rate"), std::string::npos);
  EXPECT_NE(sim.out.find("peak activation memory"), std::string::npos);
  EXPECT_NE(sim.out.find("wrote out/report.html"), std::string::npos);
  EXPECT_TRUE(dir.Read("out/trace.json").starts_with("{") ||
              dir.Read("out/trace.json").starts_with("["));
  EXPECT_NE(dir.Read("out/t.svg").find("<svg"), std::string::npos);
  EXPECT_NE(dir.Read("out/report.html").find("<html"), std::string::npos);
  // zb-h1 at P=4 M=8 with unit costs: 27 (docs/strategies.md).
  const RunResult json = RunPipeplan({"simulate", "zb.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(json.out, "makespan"), 27);
}

TEST(CliTest, ExportFormats) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan(
                {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "p.pb"},
                dir.path())
                .exit_code,
            0);
  const RunResult comms =
      RunPipeplan({"export", "p.pb", "--format", "torch-csv-comms"}, dir.path());
  ASSERT_EQ(comms.exit_code, 0) << comms.err;
  EXPECT_NE(comms.out.find("SEND_F"), std::string::npos) << comms.out;
  const RunResult text = RunPipeplan({"export", "p.pb", "--format", "textproto"}, dir.path());
  ASSERT_EQ(text.exit_code, 0);
  const RunResult plan_text = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2"}, dir.path());
  EXPECT_EQ(text.out, plan_text.out);
  const RunResult json = RunPipeplan({"export", "p.pb", "--format", "json"}, dir.path());
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_TRUE(json.out.starts_with("{"));
}

TEST(CliTest, FailedPlanLeavesNoFileAndKeepsTheOldOne) {
  ScratchDir dir;
  const std::vector<std::string> failing = {"plan",           "--strategy", "zb-h2", "--ranks", "4",
                                            "--microbatches", "4",          "-o",    "out.pb"};
  RunResult result = RunPipeplan(failing, dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(dir.List().empty()) << "no output and no temp file";

  dir.Write("out.pb", "previous contents");
  result = RunPipeplan(failing, dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(dir.Read("out.pb"), "previous contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>({"out.pb"}));

  // A successful run replaces it whole.
  result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "4", "-o", "out.pb"},
      dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(dir.Read("out.pb"), "previous contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>({"out.pb"}));
}

TEST(CliTest, WriteIntoMissingDirectoryFailsCleanly) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "nodir/p.pb"},
      dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, Input("plan", "cannot write 'nodir/p.pb': No such file or directory"));
  EXPECT_TRUE(dir.List().empty());
}

// Without a Python that has ortools, the solver-made strategies fail naming the install step.
TEST(CliTest, OptimalWithoutTheSolverNamesTheInstallStep) {
  ScratchDir dir;
  ASSERT_EQ(setenv("PIPEPLAN_SOLVER_PYTHON", "/nonexistent/python3", 1), 0);
  const RunResult result = RunPipeplan(
      {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "2", "-o", "p.pb"},
      dir.path());
  unsetenv("PIPEPLAN_SOLVER_PYTHON");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err,
            "pipeplan plan: error: the optimal strategies need OR-Tools' CP-SAT solver, and no "
            "Python with it is known (/nonexistent/python3 is missing): pip install "
            "'pipeplan[solver]' installs it with the Python package, bash "
            "scripts/setup_solver.sh for a build from source, or set PIPEPLAN_SOLVER_PYTHON to "
            "a Python with the ortools package\n");
  EXPECT_FALSE(dir.Exists("p.pb"));
}

// The plan carries the solver's verdict to simulate.
TEST(CliTest, SimulateShowsTheSolversVerdict) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan({"plan", "--strategy", "optimal", "--ranks", "4",
                                      "--microbatches", "8", "--memory-limit", "2", "-o", "o.pb"},
                                     dir.path());
  if (plan.err.find("setup_solver.sh") != std::string::npos) GTEST_SKIP() << plan.err;
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err, "note: optimal: makespan 41, optimal; best heuristic zb: 51\n");
  const RunResult simulated = RunPipeplan({"simulate", "o.pb"}, dir.path());
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_NE(simulated.out.find("o.pb: optimal, P=4 V=1 M=8\nsolver: optimal\n"), std::string::npos)
      << simulated.out;
  EXPECT_EQ(LineStartingWith(simulated.out, {"lower", "bound"}),
            (std::vector<std::string>{"lower", "bound", "41"}));
}

// compare --optimal: the solver's rows, and every catalogue row's gap to the one of its
// placement and V (P=2, M=4, unit costs: 1F1B's (M + P - 1) x 3 = 15 against 13).
TEST(CliTest, CompareWithOptimalAddsTheSolversRowsAndTheGaps) {
  ScratchDir dir;
  const RunResult result =
      RunPipeplan({"compare", "--ranks", "2", "--microbatches", "4", "--optimal"}, dir.path());
  if (result.err.find("setup_solver.sh") != std::string::npos) GTEST_SKIP() << result.err;
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> optimal = LineStartingWith(result.out, {"optimal", "1"});
  ASSERT_FALSE(optimal.empty()) << result.out;
  EXPECT_EQ(optimal[2], "13");
  EXPECT_EQ(optimal.back(), "optimal");
  const std::vector<std::string> one_f_one_b = LineStartingWith(result.out, {"1f1b", "1"});
  ASSERT_FALSE(one_f_one_b.empty()) << result.out;
  EXPECT_EQ(one_f_one_b[2], "15");
  EXPECT_EQ(one_f_one_b.back(), "15.4%");
  EXPECT_FALSE(LineStartingWith(result.out, {"optimal-v", "2"}).empty()) << result.out;
}

}  // namespace
}  // namespace pipeplan::cli_test
