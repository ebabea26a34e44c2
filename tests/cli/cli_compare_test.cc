// End-to-end tests of the pipeplan command across strategies: compare, demo, auto, the
// post-validation and overlap families.
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::cli_test {
namespace {

TEST(CliTest, CompareListsEveryStrategyAndMarksTheBest) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "4", "--html", "cmp/report.html"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2"}) {
    EXPECT_NE(result.out.find(name), std::string::npos) << name;
  }
  // zb-h2 needs M >= 2P: listed with the reason.
  const size_t zbh2 = result.out.find("zb-h2");
  ASSERT_NE(zbh2, std::string::npos);
  const std::string zbh2_line = result.out.substr(zbh2, result.out.find('\n', zbh2) - zbh2);
  EXPECT_NE(zbh2_line.find("failed: "), std::string::npos) << zbh2_line;
  EXPECT_NE(result.out.find("\n*"), std::string::npos) << result.out;
  // Catalogue order.
  EXPECT_LT(result.out.find("gpipe"), result.out.find("zb-h1"));
  EXPECT_TRUE(dir.Exists("cmp/report.html"));
}

TEST(CliTest, DemoWritesReport) {
  ScratchDir dir;
  const RunResult result = RunPipeplan({"demo"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("report: pipeplan-report/index.html"), std::string::npos) << result.out;
  const std::string html = dir.Read("pipeplan-report/index.html");
  EXPECT_NE(html.find("<html"), std::string::npos);
  // Every strategy of the catalogue has a row, plans and gets a timeline in the report.
  for (const Strategy& strategy : AllStrategies()) {
    const std::string name(strategy.name);
    const std::vector<std::string> row = LineStartingWith(result.out, {name});
    const std::vector<std::string> best_row = LineStartingWith(result.out, {"*", name});
    EXPECT_TRUE(!row.empty() || !best_row.empty()) << name << "\n" << result.out;
    EXPECT_NE(html.find("<h2>" + name + "</h2>"), std::string::npos) << name;
  }
  // The paper's figures (zb_bubble_rate column).
  EXPECT_EQ(LineStartingWith(result.out, {"1f1b", "1"}).at(3), "0.2431");
  EXPECT_EQ(LineStartingWith(result.out, {"zb-h1", "1"}).at(3), "0.1585");
  EXPECT_EQ(LineStartingWith(result.out, {"zb-h2", "1"}).at(3), "0.1083");
  // auto's pick is printed and has its own timeline; every strategy planned.
  EXPECT_NE(result.out.find("\nauto picks "), std::string::npos) << result.out;
  EXPECT_NE(html.find("<h2>auto -&gt; "), std::string::npos);
  EXPECT_EQ(html.find("Could not plan"), std::string::npos);
  EXPECT_EQ(dir.List(),
            std::vector<std::string>({"pipeplan-report", "pipeplan-report/index.html"}));

  const RunResult elsewhere = RunPipeplan({"demo", "--output-dir", "a/b"}, dir.path());
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_TRUE(dir.Exists("a/b/index.html"));
  EXPECT_NE(elsewhere.out.find("report: a/b/index.html"), std::string::npos);
}

// ZB-V with post-validation: every rank gets a PV, and the (P-1)^2 = 9 receives whose sends
// precede the sender's PV are tagged rollback (docs/strategies.md, post-validation;
// post_validation.h).
TEST(CliTest, PostValidationShowsInSimulateReportsAndExportNotes) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches",
                                      "8", "--post-validation", "-o", "zbv.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err, "");

  const RunResult sim = RunPipeplan({"simulate", "zbv.pb", "--html", "r.html"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\npost-validation: PV on every rank, 9 receives tagged rollback\n"),
            std::string::npos)
      << sim.out;
  const std::string html = dir.Read("r.html");
  EXPECT_NE(html.find("post-validation: PV on every rank, 9 receives tagged rollback"),
            std::string::npos);
  EXPECT_NE(html.find("pp-PV"), std::string::npos) << "the timeline draws the PV actions";

  const RunResult json = RunPipeplan({"simulate", "zbv.pb", "--json"}, dir.path());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"post_validation\":true,\"rollback_receives\":9,"), std::string::npos)
      << json.out;

  // With P=8: (P-1)^2 = 49.
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "8", "--microbatches", "16",
                         "--post-validation", "-o", "zbv8.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult json8 = RunPipeplan({"simulate", "zbv8.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(json8.out, "rollback_receives"), 49) << json8.out;

  // Without --post-validation there is no such line, and the JSON says so.
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches", "8", "-o",
                         "plain.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult plain = RunPipeplan({"simulate", "plain.pb"}, dir.path());
  EXPECT_EQ(plain.out.find("post-validation"), std::string::npos) << plain.out;
  const RunResult plain_json = RunPipeplan({"simulate", "plain.pb", "--json"}, dir.path());
  EXPECT_NE(plain_json.out.find("\"post_validation\":false,\"rollback_receives\":0,"),
            std::string::npos)
      << plain_json.out;

  // torch's CSV cannot hold PV or rollback flags: the export says so on stderr and succeeds.
  const RunResult csv = RunPipeplan({"export", "zbv.pb", "--format", "torch-csv"}, dir.path());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.err.find("note: post-validation actions left out"), std::string::npos) << csv.err;
  EXPECT_EQ(csv.out.find("PV"), std::string::npos);
  const RunResult comms =
      RunPipeplan({"export", "zbv.pb", "--format", "torch-csv-comms"}, dir.path());
  ASSERT_EQ(comms.exit_code, 0) << comms.err;
  EXPECT_NE(comms.err.find("note: rollback flags left out"), std::string::npos) << comms.err;
  const RunResult plain_csv =
      RunPipeplan({"export", "plain.pb", "--format", "torch-csv-comms"}, dir.path());
  EXPECT_EQ(plain_csv.err, "");
}

// A strategy that cannot take the V asked for is listed with the reason, in the words the
// request was given in: the flag, or the request file's field.
TEST(CliTest, CompareNamesWhatTheUserGaveInFailedRows) {
  ScratchDir dir;
  const RunResult flags = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--stages-per-rank", "3"}, dir.path());
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  EXPECT_NE(flags.out.find("failed: zbv supports --stages-per-rank <= 2, got 3"), std::string::npos)
      << flags.out;
  dir.Write("request.json",
            R"({"topology": {"ranks": 4, "microbatches": 8, "stages_per_rank": 3}})");
  const RunResult file = RunPipeplan({"compare", "--request", "request.json"}, dir.path());
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("failed: zbv supports topology.stages_per_rank <= 2, got 3"),
            std::string::npos)
      << file.out;
}

TEST(CliTest, CompareWithPostValidationKeepsToTheZeroBubbleFamily) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--post-validation", "--html", "pv.html"},
      dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("rollback RECVs"), std::string::npos) << result.out;
  EXPECT_TRUE(LineStartingWith(result.out, {"1f1b"}).empty()) << result.out;
  EXPECT_TRUE(LineStartingWith(result.out, {"dualpipe"}).empty()) << result.out;
  // zbv's row ends with its rollback receives.
  std::vector<std::string> zbv = LineStartingWith(result.out, {"*", "zbv"});
  if (zbv.empty()) zbv = LineStartingWith(result.out, {"zbv"});
  ASSERT_FALSE(zbv.empty()) << result.out;
  EXPECT_EQ(zbv.back(), "9");
  EXPECT_NE(dir.Read("pv.html").find("receives tagged rollback: zb-h1 9"), std::string::npos);
}

TEST(CliTest, OverlapCostDrivesTheOverlapStrategies) {
  ScratchDir dir;
  const std::vector<std::string> base = {
      "plan", "--strategy", "1f1b-overlap", "--ranks", "4", "--microbatches", "8"};
  // Without --overlap a cell costs F + B: the same as 1F1B, (M + P - 1)(F + B) = 33.
  EXPECT_DOUBLE_EQ(PlannedMakespan(base, dir), 33);
  std::vector<std::string> cheaper = base;
  cheaper.insert(cheaper.end(), {"--overlap", "2"});
  const double with_overlap = PlannedMakespan(cheaper, dir);
  EXPECT_LT(with_overlap, 33);
  EXPECT_DOUBLE_EQ(with_overlap, 26);
  std::vector<std::string> dearer = base;
  dearer.insert(dearer.end(), {"--overlap=4"});
  EXPECT_GT(PlannedMakespan(dearer, dir), 33);
  // Strategies without overlap cells ignore it.
  EXPECT_DOUBLE_EQ(PlannedMakespan({"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches",
                                    "8", "--overlap", "2"},
                                   dir),
                   33);

  // compare: one share's overlap cost, split over the V stages like F and B.
  const RunResult plain =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8"}, dir.path());
  const RunResult cheap =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8", "--overlap", "2"}, dir.path());
  ASSERT_EQ(cheap.exit_code, 0) << cheap.err;
  EXPECT_NE(cheap.out.find("overlap=2"), std::string::npos) << cheap.out;
  for (const std::string name : {"1f1b-overlap", "interleaved-1f1b-overlap", "dualpipe-v"}) {
    std::vector<std::string> before = LineStartingWith(plain.out, {name});
    std::vector<std::string> after = LineStartingWith(cheap.out, {name});
    if (after.empty()) after = LineStartingWith(cheap.out, {"*", name});
    ASSERT_GE(before.size(), 3u) << name << "\n" << plain.out;
    ASSERT_GE(after.size(), 3u) << name << "\n" << cheap.out;
    const size_t makespan_at = after[0] == "*" ? 3 : 2;
    EXPECT_LT(std::stod(after[makespan_at]), std::stod(before[2])) << name;
  }
  EXPECT_EQ(LineStartingWith(cheap.out, {"1f1b-overlap"}).at(2), "26");
}

TEST(CliTest, AutoStrategyNamesItsPick) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8", "-o", "auto.pb"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  // One stderr line naming the pick.
  ASSERT_TRUE(plan.err.starts_with("note: auto chose ")) << plan.err;
  EXPECT_EQ(std::count(plan.err.begin(), plan.err.end(), '\n'), 1) << plan.err;
  const std::string picked = plan.err.substr(17, plan.err.find(' ', 17) - 17);
  EXPECT_NE(FindStrategy(picked), nullptr) << picked;
  EXPECT_NE(plan.out.find("wrote auto -> " + picked + " plan"), std::string::npos) << plan.out;

  const RunResult sim = RunPipeplan({"simulate", "auto.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\"strategy\":\"auto -> " + picked + "\""), std::string::npos) << sim.out;
  // No slower than the best single strategy of compare (25.5 at P=4 M=8, unit costs), and
  // the note gives the simulated makespan.
  const double makespan = JsonNumber(sim.out, "makespan");
  EXPECT_LE(makespan, 25.5);
  const size_t at = plan.err.find("makespan ");
  ASSERT_NE(at, std::string::npos) << plan.err;
  EXPECT_DOUBLE_EQ(std::strtod(plan.err.c_str() + at + 9, nullptr), makespan) << plan.err;

  // Within a memory limit, and with post-validation: still a zero-bubble pick that fits.
  const RunResult limited =
      RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8",
                   "--memory-limit", "3", "--post-validation", "-o", "limited.pb"},
                  dir.path());
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  ASSERT_TRUE(limited.err.starts_with("note: auto chose ")) << limited.err;
  const std::string limited_pick = limited.err.substr(17, limited.err.find(' ', 17) - 17);
  const RunResult limited_sim = RunPipeplan({"simulate", "limited.pb", "--json"}, dir.path());
  ASSERT_EQ(limited_sim.exit_code, 0) << limited_sim.err;
  for (const double peak : JsonNumbers(limited_sim.out, "peak_memory")) EXPECT_LE(peak, 3);
  EXPECT_GT(JsonNumber(limited_sim.out, "rollback_receives"), 0) << limited_sim.out;
  EXPECT_NE(limited_pick, "1f1b");
  EXPECT_NE(limited_pick, "dualpipe");
}

TEST(CliTest, AutoWithAnImpossibleMemoryLimitFails) {
  ScratchDir dir;
  const RunResult result =
      RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8",
                   "--memory-limit", "0.5", "-o", "auto.pb"},
                  dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(
      result.err.starts_with("pipeplan plan: error: auto: no strategy fits memory limit 0.5"))
      << result.err;
  // The library names the smallest limit that fits and who needs it.
  EXPECT_NE(result.err.find("; the smallest limit that fits is "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(", needed by "), std::string::npos) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_TRUE(dir.List().empty());
}

// The raised limits zb orders under are candidates of their own; those that failed share one
// row per strategy and V (their range, the reason at the lowest) instead of a row each.
TEST(CliTest, CompareAutoGroupsTheOrderLimitsThatFailed) {
  ScratchDir dir;
  const std::string costs =
      std::string(PIPEPLAN_TEST_DATA_DIR) + "/../../examples/h200_zbv_costs.json";
  const RunResult result = RunPipeplan({"compare", "--ranks", "8", "--microbatches", "16",
                                        "--costs", costs, "--memory-limit", "2000MiB", "--auto"},
                                       dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // Planned: zb under the asked limit and under raised ones, each its own numbered row.
  int zb_planned = 0;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::string rank, strategy, v, setting;
    cells >> rank >> strategy >> v >> setting;
    if (rank != "-" && strategy == "zb" && setting.starts_with("order<=")) ++zb_planned;
    EXPECT_FALSE(rank == "-" && strategy == "zb" && setting == "order<=none")
        << "a failed order limit on a row of its own: " << line;
  }
  EXPECT_GE(zb_planned, 2) << result.out;
  const std::vector<std::string> failed = LineStartingWith(result.out, {"-", "zb", "1"});
  ASSERT_GE(failed.size(), 5u) << result.out;
  EXPECT_TRUE(failed[3].starts_with("order<=")) << failed[3];  // "order<=2.20 GiB..none"
  EXPECT_EQ(failed[4], "GiB..none");
  EXPECT_NE(result.out.find("  failed at each of "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("; at the lowest: zb needs "), std::string::npos) << result.out;
}

TEST(CliTest, CompareAutoListsTheCandidates) {
  ScratchDir dir;
  const RunResult plain =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8"}, dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("auto picks"), std::string::npos) << "only with --auto";

  const RunResult result = RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8",
                                        "--memory-limit", "4", "--auto", "--html", "cmp.html"},
                                       dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The usual table comes first, unchanged.
  EXPECT_TRUE(result.out.starts_with("P=4 M=8;")) << result.out;
  EXPECT_LT(result.out.find("(* = smallest makespan)"), result.out.find("auto picks "));
  EXPECT_FALSE(LineStartingWith(result.out, {"gpipe"}).empty());

  // auto's pick is the same as plan --strategy auto's.
  const RunResult plan = RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4",
                                      "--microbatches", "8", "--memory-limit", "4", "-o", "a.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const std::string picked = plan.err.substr(17, plan.err.find(' ', 17) - 17);
  EXPECT_NE(result.out.find("\nauto picks " + picked + " (V="), std::string::npos) << result.out;

  // Candidates fastest first: numbered rows with non-decreasing makespans, all within the limit.
  std::vector<double> makespans;
  for (int rank = 1;; ++rank) {
    const std::vector<std::string> row = LineStartingWith(result.out, {std::to_string(rank)});
    if (row.empty()) break;
    ASSERT_GE(row.size(), 5u);
    makespans.push_back(std::stod(row[row.size() - 2]));
    EXPECT_LE(std::stod(row.back()), 4) << "peak memory within the limit";
  }
  ASSERT_GE(makespans.size(), 10u) << result.out;
  EXPECT_TRUE(std::is_sorted(makespans.begin(), makespans.end()));
  // The failures follow with their reason: zb-h2 needs 2P - 1 = 7 activations.
  const std::vector<std::string> failed = LineStartingWith(result.out, {"-", "zb-h2", "1"});
  ASSERT_FALSE(failed.empty()) << result.out;
  EXPECT_NE(result.out.find("failed: zb-h2 needs 7 memory on rank 0, above the memory limit 4"),
            std::string::npos);
  // The report carries auto's plan too.
  EXPECT_NE(dir.Read("cmp.html").find("<h2>auto -&gt; " + picked + "</h2>"), std::string::npos);
}

// compare splits a share's costs over ChunksPerShare stages exactly as auto does: each
// strategy's row equals auto's candidate for the same strategy and V.
TEST(CliTest, CompareAndAutoAgree) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--forward", "2", "--backward-input",
       "1.5", "--backward-weight", "1.5", "--comm", "0.25", "--auto"},
      dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string table = result.out.substr(0, result.out.find("auto picks"));
  const std::string candidates = result.out.substr(result.out.find("auto picks"));
  int checked = 0;
  for (const std::string name : {"1f1b", "zb-h1", "zbv", "v-half", "dualpipe", "dualpipe-v",
                                 "1f1b-overlap", "interleaved-zb"}) {
    std::vector<std::string> row = LineStartingWith(table, {name});
    if (row.empty()) row = LineStartingWith(table, {"*", name});
    ASSERT_FALSE(row.empty()) << name << "\n" << table;
    if (row[0] == "*") row.erase(row.begin());
    // Find auto's candidate with the same strategy and V.
    std::istringstream lines(candidates);
    bool found = false;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::vector<std::string> tokens;
      for (std::string word; words >> word;) tokens.push_back(word);
      if (tokens.size() == 5 && tokens[1] == name && tokens[2] == row[1]) {
        EXPECT_EQ(tokens[3], row[2]) << name << " V=" << row[1];
        found = true;
      }
    }
    EXPECT_TRUE(found) << name << "\n" << candidates;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

// B alone, by flag or in a cost file, says nothing of its split: I = W = B / 2 is assumed, the
// zero-bubble rows say so, and auto picks the fastest candidate that does not rest on it,
// naming the faster one and what to give. With I and W given nothing is assumed.
TEST(CliTest, BAloneLeavesItsSplitAssumedAndAutoSaysWhatToGive) {
  ScratchDir dir;
  dir.Write("costs.textproto", "stages { forward: 2 backward: 3 }\nboundaries { latency: 0.25 }\n");
  const std::vector<std::string> shape = {"compare", "--ranks", "4", "--microbatches", "8"};
  for (const std::vector<std::string>& costs :
       {std::vector<std::string>{"--forward", "2", "--backward", "3", "--comm", "0.25"},
        std::vector<std::string>{"--costs", "costs.textproto"}}) {
    SCOPED_TRACE(costs[0]);
    std::vector<std::string> args = shape;
    args.insert(args.end(), costs.begin(), costs.end());
    args.emplace_back("--auto");
    const RunResult result = RunPipeplan(args, dir.path());
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const std::string table = result.out.substr(0, result.out.find("auto picks"));
    const std::vector<std::string> zb = LineStartingWith(table, {"zb-h1"});
    const std::vector<std::string> one = LineStartingWith(table, {"1f1b"});
    ASSERT_GE(zb.size(), 5u) << table;
    ASSERT_GE(one.size(), 2u) << table;
    EXPECT_EQ(std::vector<std::string>(zb.end() - 5, zb.end()),
              (std::vector<std::string>{"I", "+", "W", "=", "B"}))
        << table;
    EXPECT_EQ(one.back(), "-") << table;
    EXPECT_NE(result.out.find("whose step rests on no assumed figure"), std::string::npos)
        << result.out;
    EXPECT_NE(result.out.find("only if I + W = B (assumed: no run measured it), so it is not "
                              "picked; give I and W (backward_input, backward_weight)"),
              std::string::npos)
        << result.out;
  }
  const RunResult given = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--forward", "2", "--backward-input",
       "1.5", "--backward-weight", "1.5", "--comm", "0.25", "--auto"},
      dir.path());
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(given.out.find("assume"), std::string::npos) << given.out;
}

// Per-stage costs (as calibrate writes them) describe one cut of the model; compare and auto
// cut it again by depth for every other V. Four equal entries at P=4 are the same network as
// a uniform share of the same figures: every row and every candidate must agree.
TEST(CliTest, ComparePerStageCostsCutForEveryV) {
  ScratchDir dir;
  std::string per_stage;
  for (int s = 0; s < 4; ++s) per_stage += "stages { forward: 4 backward: 6 }\n";
  dir.Write("costs.textproto", per_stage + "boundaries { latency: 0.25 }\n");
  const RunResult given = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--costs", "costs.textproto", "--auto"},
      dir.path());
  ASSERT_EQ(given.exit_code, 0) << given.err;
  const RunResult share =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8", "--forward", "4", "--backward",
                   "6", "--comm", "0.25", "--auto"},
                  dir.path());
  ASSERT_EQ(share.exit_code, 0) << share.err;
  // Everything after the first line (which states the costs).
  const auto body = [](const std::string& out) { return out.substr(out.find('\n')); };
  EXPECT_EQ(body(given.out), body(share.out));
  EXPECT_EQ(given.out.find("failed:"), std::string::npos) << given.out;
}

}  // namespace
}  // namespace pipeplan::cli_test
