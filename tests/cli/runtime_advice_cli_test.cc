// The documented loop with --runtime, end to end on the command line: a runtime whose split
// backward costs 1.8 B (the synthetic executor holding those figures) is profiled with 1F1B
// alone, then with a zero-bubble run too; auto says what it assumed, then follows what was
// measured. Also: diff reads which timeline is measured, --runtime's errors, memory units and
// a cost file's own limit.
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"

namespace pipeplan::cli_test {
namespace {

void Ok(const RunResult& result) { ASSERT_EQ(result.exit_code, 0) << result.err << result.out; }

// Plans `strategy` at P = 2, M = 8 with the runtime's true figures, runs it on the synthetic
// executor and profiles the measured step into `name`.json.
void ProfileRun(const ScratchDir& dir, const std::string& strategy, const std::string& name) {
  Ok(RunPipeplan({"plan", "--strategy", strategy, "--ranks", "2", "--microbatches", "8",
                  "--forward", "1", "--backward", "2", "--backward-input", "1.8",
                  "--backward-weight", "1.8", "-o", name + ".pb"},
                 dir.path()));
  Ok(RunPipeplan({"run", name + ".pb", "--time-scale", "0.002", "--steps", "2", "--warmup", "1",
                  "--timeline", name + "-run.pb"},
                 dir.path()));
  Ok(RunPipeplan({"profile", name + "-run.pb", "-o", name + ".json"}, dir.path()));
}

RunResult AutoFor(const ScratchDir& dir, const std::string& costs) {
  return RunPipeplan({"plan", "--strategy", "auto", "--runtime", "torch", "--ranks", "2",
                      "--microbatches", "8", "--costs", costs, "-o", "auto.pb"},
                     dir.path());
}

TEST(CliRuntimeAdvice, AnAssumedSplitIsSaidAndAMeasuredOneFollowed) {
  ScratchDir dir;
  ProfileRun(dir, "1f1b", "fb");
  ProfileRun(dir, "zb-h1", "zb");

  // 1F1B alone: I and W are assumed (B / 2 each), and zero bubble looks faster than it is.
  Ok(RunPipeplan({"calibrate", "fb.json", "-o", "fb-costs.json"}, dir.path()));
  const RunResult assumed = AutoFor(dir, "fb-costs.json");
  Ok(assumed);
  EXPECT_NE(assumed.err.find("only if"), std::string::npos) << assumed.err;
  EXPECT_NE(assumed.err.find("I + W = B"), std::string::npos) << assumed.err;
  EXPECT_NE(assumed.err.find("profile a zero-bubble plan"), std::string::npos) << assumed.err;
  const RunResult compare = RunPipeplan({"compare", "--ranks", "2", "--microbatches", "8",
                                         "--costs", "fb-costs.json", "--runtime", "torch"},
                                        dir.path());
  Ok(compare);
  const std::vector<std::string> zb_row = LineStartingWith(compare.out, {"zb-h1"});
  ASSERT_FALSE(zb_row.empty()) << compare.out;
  EXPECT_EQ(zb_row.back(), "B") << compare.out;  // ... "assumes: I + W = B"
  EXPECT_EQ(compare.out.find("dualpipe "), std::string::npos) << compare.out;  // torch cannot

  // Both runs calibrated together: every figure measured, and the split's true cost ranks
  // zero bubble behind 1F1B; auto's pick reads no I or W and no note names an assumed split.
  const RunResult merged =
      RunPipeplan({"calibrate", "fb.json", "zb.json", "-o", "costs.json"}, dir.path());
  Ok(merged);
  EXPECT_NE(merged.out.find("[0] 1f1b P=2 V=1 M=8, measured: F, B"), std::string::npos)
      << merged.out;
  EXPECT_NE(merged.out.find("[1] zb-h1 P=2 V=1 M=8, measured: I, W"), std::string::npos)
      << merged.out;
  const RunResult measured = AutoFor(dir, "costs.json");
  Ok(measured);
  EXPECT_EQ(measured.err.find("I + W = B"), std::string::npos) << measured.err;
  // 1f1b, gpipe and looped-bfs tie up to the run's noise; none of them splits the backward.
  const size_t chose = measured.err.find("auto chose ");
  ASSERT_NE(chose, std::string::npos) << measured.err;
  const std::string pick =
      measured.err.substr(chose + 11, measured.err.find(' ', chose + 11) - chose - 11);
  EXPECT_TRUE(pick == "1f1b" || pick == "gpipe" || pick == "looped-bfs" || pick == "1f1b-overlap")
      << measured.err;
  EXPECT_NE(measured.err.find("(V=1) among what torch runs"), std::string::npos) << measured.err;
  const RunResult ranked = RunPipeplan({"compare", "--ranks", "2", "--microbatches", "8", "--costs",
                                        "costs.json", "--runtime", "torch"},
                                       dir.path());
  Ok(ranked);
  const std::vector<std::string> fb = LineStartingWith(ranked.out, {"1f1b"});
  const std::vector<std::string> zb = LineStartingWith(ranked.out, {"zb-h1"});
  ASSERT_GE(fb.size(), 3u);
  ASSERT_GE(zb.size(), 3u);
  EXPECT_LT(std::stod(fb[2]), std::stod(zb[2])) << ranked.out;  // makespan column
}

TEST(CliRuntimeAdvice, RuntimeErrors) {
  ScratchDir dir;
  const RunResult unknown = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "--runtime", "tarch"},
      dir.path());
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--runtime: unknown runtime 'tarch' (known: pipeplan-torch, torch, "
                             "torchtitan, megatron)"),
            std::string::npos)
      << unknown.err;
  const RunResult dual = RunPipeplan({"plan", "--strategy", "dualpipe", "--ranks", "2",
                                      "--microbatches", "4", "--runtime", "torch", "-o", "d.pb"},
                                     dir.path());
  EXPECT_EQ(dual.exit_code, 1);
  EXPECT_NE(dual.err.find("runtime torch cannot run dualpipe"), std::string::npos) << dual.err;
  EXPECT_FALSE(dir.Exists("d.pb"));
  const RunResult megatron = RunPipeplan({"plan", "--strategy", "zb-h1", "--ranks", "2",
                                          "--microbatches", "4", "--runtime", "megatron"},
                                         dir.path());
  EXPECT_EQ(megatron.exit_code, 1);
  EXPECT_NE(megatron.err.find("runtime megatron cannot run zb-h1"), std::string::npos)
      << megatron.err;
}

TEST(CliRuntimeAdvice, DiffReadsWhichTimelineIsMeasured) {
  ScratchDir dir;
  Ok(RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "-o", "p.pb"},
      dir.path()));
  Ok(RunPipeplan({"simulate", "p.pb", "--timeline", "sim.pb"}, dir.path()));
  Ok(RunPipeplan({"run", "p.pb", "--time-scale", "0.001", "--steps", "1", "--warmup", "0",
                  "--timeline", "run.pb"},
                 dir.path()));
  const RunResult right = RunPipeplan({"diff", "sim.pb", "run.pb"}, dir.path());
  const RunResult swapped = RunPipeplan({"diff", "run.pb", "sim.pb"}, dir.path());
  Ok(right);
  Ok(swapped);
  EXPECT_EQ(right.err, "");
  EXPECT_NE(swapped.err.find("run.pb is measured and sim.pb simulated"), std::string::npos)
      << swapped.err;
  EXPECT_EQ(swapped.out, right.out);  // the same comparison, the same sign
  const RunResult both = RunPipeplan({"diff", "sim.pb", "sim.pb"}, dir.path());
  Ok(both);
  EXPECT_NE(both.out.find("sim.pb (first) vs sim.pb (second)"), std::string::npos) << both.out;
  EXPECT_NE(both.err.find("both timelines are simulated"), std::string::npos) << both.err;
}

TEST(CliRuntimeAdvice, MemoryUnitsInAnyCaseAndACostFilesOwnLimit) {
  ScratchDir dir;
  dir.Write("bytes.txt",
            "stages { forward: 1 backward: 2 }\n"
            "memory { unit: \"bytes\" limit: 1 stages { activation: 1048576 } }\n");
  const std::vector<std::string> plan = {"plan",           "--strategy", "1f1b",    "--ranks",  "2",
                                         "--microbatches", "4",          "--costs", "bytes.txt"};
  // The file's limit (1 byte) holds where no --memory-limit is given.
  const RunResult own = RunPipeplan(plan, dir.path());
  EXPECT_EQ(own.exit_code, 1) << own.err;
  EXPECT_NE(own.err.find("above the memory limit"), std::string::npos) << own.err;
  std::vector<std::string> lower = plan;
  lower.insert(lower.end(), {"--memory-limit", "12mib"});
  Ok(RunPipeplan(lower, dir.path()));
  std::vector<std::string> bare = plan;
  bare.insert(bare.end(), {"--memory-limit", "12M"});
  const RunResult ambiguous = RunPipeplan(bare, dir.path());
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_NE(ambiguous.err.find("'12M' is ambiguous: MiB (powers of 1024) or MB (powers of 1000)?"),
            std::string::npos)
      << ambiguous.err;
}

}  // namespace
}  // namespace pipeplan::cli_test
