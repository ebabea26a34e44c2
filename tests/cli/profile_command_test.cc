// End-to-end tests of 'pipeplan profile' and 'pipeplan calibrate': plan -> run (synthetic) ->
// profile -> calibrate -> plan --costs -> simulate; the exact loop through a simulated
// timeline; and the errors, exit codes and untouched outputs of inputs that do not fit.
#include <cstdlib>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan::cli_test {
namespace {

CostModel ReadCosts(const ScratchDir& dir, const std::string& name) {
  const std::string content = dir.Read(name);
  const StatusOr<CostModel> costs = ParseCostModel(content, DetectProtoFormat(name, content));
  EXPECT_TRUE(costs.ok()) << costs.status().message();
  return costs.ok() ? *costs : CostModel{};
}

// The number after "makespan": in 'simulate --json' output.
double Makespan(const std::string& json) {
  const std::string key = "\"makespan\":";
  const size_t at = json.find(key);
  EXPECT_NE(at, std::string::npos) << json;
  return at == std::string::npos ? -1 : std::strtod(json.c_str() + at + key.size(), nullptr);
}

void Ok(const RunResult& result) { ASSERT_EQ(result.exit_code, 0) << result.err << result.out; }

// The synthetic executor holds F for 1 and B for 2 units of 5 ms each. A measured duration is
// never shorter than its hold (the executor ends at or after its deadline), so the lower bounds
// hold on every run, and they alone catch F and B swapped (B would be half its bound). Above,
// the bound only catches a unit mix-up (off by 1000x): 20x the hold, far above what a loaded
// machine adds (+56% for a sanitizer build with both cores taken, 2026-11-24). How close a
// measured step comes to the model is the timing suites' bar (runtime_fidelity_test), not a
// unit test's.
TEST(CliProfile, SyntheticRunCalibratesToTheHeldCostsTimesTheTimeScale) {
  constexpr double kUs = 5000;       // microseconds per unit
  constexpr double kUnitMixUp = 20;  // a figure this many times its hold is in the wrong unit
  ScratchDir dir;
  const std::vector<std::string> plan_flags = {"--strategy",     "1f1b", "--ranks",   "2",
                                               "--microbatches", "8",    "--forward", "1",
                                               "--backward",     "2"};
  std::vector<std::string> plan = {"plan"};
  plan.insert(plan.end(), plan_flags.begin(), plan_flags.end());
  plan.insert(plan.end(), {"-o", "plan.pb"});
  Ok(RunPipeplan(plan, dir.path()));

  for (const char* timeline : {"run1.pb", "run2.json"}) {
    Ok(RunPipeplan({"run", "plan.pb", "--executor", "synthetic", "--time-scale", "0.005", "--steps",
                    "3", "--warmup", "1", "--timeline", timeline},
                   dir.path()));
  }
  // The timeline file records the time scale its times are in.
  const StatusOr<TimelineFile> file = ParseTimelineFile(dir.Read("run1.pb"), ProtoFormat::kBinary);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->seconds_per_unit, 0.005);

  const RunResult profile =
      RunPipeplan({"profile", "run1.pb", "run2.json", "-o", "profile.json"}, dir.path());
  Ok(profile);
  EXPECT_TRUE(
      profile.out.starts_with("times in us: median (p90 - p10 as a share of the "
                              "median); - = not measured\n\nstage  "))
      << profile.out;
  // Column widths follow the figures, so only the order of the headings is fixed.
  EXPECT_NE(profile.out.find("\nboundary  clean transfers  late receives"), std::string::npos)
      << profile.out;
  EXPECT_NE(profile.out.find("wrote profile (2 stages, 2 steps, source \"measured\") to "
                             "profile.json\n"),
            std::string::npos)
      << profile.out;

  const RunResult calibrate =
      RunPipeplan({"calibrate", "profile.json", "-o", "costs.txtpb"}, dir.path());
  Ok(calibrate);
  EXPECT_NE(calibrate.out.find("costs in us per stage"), std::string::npos) << calibrate.out;
  EXPECT_NE(calibrate.out.find("* I and W not measured: I = 0.5 B (--input-share), W = B - I"),
            std::string::npos)
      << calibrate.out;
  EXPECT_NE(calibrate.out.find("wrote per-stage cost model to costs.txtpb\n"), std::string::npos);

  const CostModel costs = ReadCosts(dir, "costs.txtpb");
  ASSERT_EQ(costs.stages.size(), 2u);
  for (const StageCosts& stage : costs.stages) {
    EXPECT_GE(stage.forward, 1 * kUs * 0.999);
    EXPECT_GE(stage.backward, 2 * kUs * 0.999);
    EXPECT_DOUBLE_EQ(stage.backward_input, stage.backward / 2);
    EXPECT_LE(stage.forward, 1 * kUs * kUnitMixUp);
    EXPECT_LE(stage.backward, 2 * kUs * kUnitMixUp);
  }

  // The planner reads the calibrated file; the plan's simulated step is the held one,
  // (M + P - 1)(F + B) = 27 units, plus the measured transfer latencies and receive overheads.
  std::vector<std::string> replan = {"plan"};
  replan.insert(replan.end(), plan_flags.begin(), plan_flags.end() - 4);  // not F and B
  replan.insert(replan.end(), {"--costs", "costs.txtpb", "-o", "calibrated.pb"});
  Ok(RunPipeplan(replan, dir.path()));
  const RunResult simulate = RunPipeplan({"simulate", "calibrated.pb", "--json"}, dir.path());
  Ok(simulate);
  EXPECT_GE(Makespan(simulate.out), 27 * kUs * 0.999);
  EXPECT_LE(Makespan(simulate.out), 27 * kUs * kUnitMixUp);
}

// The simulator holds every action for exactly its cost and every clean transfer for exactly
// the latency, so the loop through a simulated timeline gives the costs back exactly.
TEST(CliProfile, SimulatedTimelineGivesThePlansCostsBack) {
  ScratchDir dir;
  Ok(RunPipeplan(
      {"plan", "--strategy", "zb-h1", "--ranks", "2", "--microbatches", "4", "--forward", "3",
       "--backward-input", "2", "--backward-weight", "1", "--comm", "0.5", "-o", "plan.pb"},
      dir.path()));
  Ok(RunPipeplan({"simulate", "plan.pb", "--timeline", "sim.txtpb"}, dir.path()));

  const RunResult unscaled = RunPipeplan({"profile", "sim.txtpb", "-o", "p.txtpb"}, dir.path());
  EXPECT_EQ(unscaled.exit_code, 1);
  EXPECT_EQ(unscaled.err,
            "pipeplan profile: error: sim.txtpb: the timeline records no time scale (a simulated "
            "timeline is in the plan's cost unit); give --time-scale S, the seconds per unit\n");
  EXPECT_FALSE(dir.Exists("p.txtpb"));

  Ok(RunPipeplan({"profile", "sim.txtpb", "--time-scale", "1e-3", "--source", "predicted", "-q",
                  "-o", "p.txtpb"},
                 dir.path()));
  const StatusOr<Profile> profile = ParseProfile(dir.Read("p.txtpb"), ProtoFormat::kText);
  ASSERT_TRUE(profile.ok()) << profile.status().message();
  EXPECT_EQ(profile->source, "predicted");
  EXPECT_EQ(profile->stages[1].backward_input.median, 2e-3);

  // Units of 1 ms, calibrated in ms: the plan's own figures.
  const RunResult calibrate =
      RunPipeplan({"calibrate", "p.txtpb", "--unit", "ms", "-q", "-o", "c.json"}, dir.path());
  Ok(calibrate);
  EXPECT_EQ(calibrate.out, "");
  const CostModel costs = ReadCosts(dir, "c.json");
  ASSERT_EQ(costs.stages.size(), 2u);
  for (const StageCosts& stage : costs.stages) {
    EXPECT_DOUBLE_EQ(stage.forward, 3);
    EXPECT_DOUBLE_EQ(stage.backward_input, 2);
    EXPECT_DOUBLE_EQ(stage.backward_weight, 1);
    EXPECT_DOUBLE_EQ(stage.backward, 3);
  }
  ASSERT_EQ(costs.boundaries.size(), 1u);
  EXPECT_DOUBLE_EQ(costs.boundaries[0].latency, 0.5);

  // Without -o the cost model goes to stdout, with no table.
  const RunResult to_stdout = RunPipeplan({"calibrate", "p.txtpb", "--uniform"}, dir.path());
  Ok(to_stdout);
  const StatusOr<CostModel> uniform = ParseCostModel(to_stdout.out, ProtoFormat::kText);
  ASSERT_TRUE(uniform.ok()) << uniform.status().message() << "\n" << to_stdout.out;
  ASSERT_EQ(uniform->stages.size(), 2u);  // one per stage, all the same
  for (const StageCosts& stage : uniform->stages) EXPECT_DOUBLE_EQ(stage.forward, 3000);
}

// A timeline counted in bytes whose stages told their data (the model's inputs on stage 0, the
// loss's targets on stage 1): the profile keeps them and its summary names them.
TEST(CliProfile, TheDataTheStagesHoldAreNamed) {
  ScratchDir dir;
  Ok(RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "plan.pb"},
      dir.path()));
  Ok(RunPipeplan({"simulate", "plan.pb", "--timeline", "sim.txtpb"}, dir.path()));
  StatusOr<TimelineFile> file = ParseTimelineFile(dir.Read("sim.txtpb"), ProtoFormat::kText);
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (RankTimeline& rank : file->timeline.ranks) {
    rank.memory_unit = MemoryUnit::kBytes;
    rank.action_memory.assign(rank.actions.size(), {.start = 100, .end = 100, .peak = 100});
    rank.peak_memory = 100;
    rank.peak_activation_memory = 0;
  }
  file->timeline.ranks[0].stage_static = {{.stage = StageId(0), .bytes = 50, .input_bytes = 20}};
  file->timeline.ranks[1].stage_static = {{.stage = StageId(1), .bytes = 60, .target_bytes = 30}};
  const StatusOr<std::string> bytes = SerializeTimelineFile(*file, ProtoFormat::kText);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  dir.Write("bytes.txtpb", *bytes);

  const RunResult profile =
      RunPipeplan({"profile", "bytes.txtpb", "--time-scale", "1e-3", "-o", "p.txtpb"}, dir.path());
  Ok(profile);
  EXPECT_NE(profile.out.find("of which each stage's own (parameters, gradients, optimizer state, "
                             "data): 0: 50 B, 1: 60 B\nof which data: inputs 20 B (stage 0), "
                             "targets 30 B (stage 1)\n"),
            std::string::npos)
      << profile.out;
  const StatusOr<Profile> written = ParseProfile(dir.Read("p.txtpb"), ProtoFormat::kText);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(written->stages[0].memory.input_bytes, 20);
  EXPECT_EQ(written->stages[1].memory.target_bytes, 30);
  EXPECT_EQ(written->stages[1].memory.microbatches, 2);
}

TEST(CliProfile, RefusesTimelinesOfDifferentPlansScalesOrWithoutAPlan) {
  ScratchDir dir;
  Ok(RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "a.pb"},
      dir.path()));
  Ok(RunPipeplan(
      {"plan", "--strategy", "gpipe", "--ranks", "2", "--microbatches", "2", "-o", "b.pb"},
      dir.path()));
  Ok(RunPipeplan({"simulate", "a.pb", "--timeline", "a.tl"}, dir.path()));
  Ok(RunPipeplan({"simulate", "b.pb", "--timeline", "b.tl"}, dir.path()));
  const RunResult mixed =
      RunPipeplan({"profile", "a.tl", "b.tl", "--time-scale", "1", "-o", "p.txtpb"}, dir.path());
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_EQ(mixed.err,
            "pipeplan profile: error: a.tl and b.tl are timelines of different plans (their "
            "action lists differ)\n");

  // The same timeline recorded at two time scales.
  const StatusOr<TimelineFile> a = ParseTimelineFile(dir.Read("a.tl"), ProtoFormat::kText);
  ASSERT_TRUE(a.ok()) << a.status().message();
  for (const auto& [name, scale] : {std::pair<const char*, double>{"fast.txtpb", 0.001},
                                    std::pair<const char*, double>{"slow.txtpb", 0.004}}) {
    TimelineFile scaled = *a;
    scaled.seconds_per_unit = scale;
    const StatusOr<std::string> text = SerializeTimelineFile(scaled, ProtoFormat::kText);
    ASSERT_TRUE(text.ok());
    dir.Write(name, *text);
  }
  const RunResult scales =
      RunPipeplan({"profile", "fast.txtpb", "slow.txtpb", "-o", "p.txtpb"}, dir.path());
  EXPECT_EQ(scales.exit_code, 1);
  EXPECT_EQ(scales.err,
            "pipeplan profile: error: fast.txtpb and slow.txtpb have different time scales "
            "(0.001 and 0.004 s per unit): profile the runs of one time scale together\n");

  dir.Write("bare.txtpb", "source: MEASURED\nseconds_per_unit: 0.001\n");
  const RunResult bare = RunPipeplan({"profile", "bare.txtpb", "-o", "p.txtpb"}, dir.path());
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_EQ(bare.err,
            "pipeplan profile: error: bare.txtpb: the timeline carries no plan; write it with "
            "'pipeplan run PLAN --timeline FILE'\n");
  EXPECT_FALSE(dir.Exists("p.txtpb"));
}

TEST(CliProfile, ErrorsInATimelineNameItsFileRankAndAction) {
  ScratchDir dir;
  Ok(RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "plan.pb"},
      dir.path()));
  Ok(RunPipeplan({"simulate", "plan.pb", "--timeline", "good.pb"}, dir.path()));
  StatusOr<TimelineFile> file = ParseTimelineFile(dir.Read("good.pb"), ProtoFormat::kBinary);
  ASSERT_TRUE(file.ok()) << file.status().message();
  file->timeline.ranks[1].actions[1].end = file->timeline.ranks[1].actions[1].start - 0.5;
  const StatusOr<std::string> bad = SerializeTimelineFile(*file, ProtoFormat::kBinary);
  ASSERT_TRUE(bad.ok());
  dir.Write("bad.pb", *bad);
  dir.Write("p.txtpb", "untouched");
  const RunResult run = RunPipeplan(
      {"profile", "good.pb", "bad.pb", "--time-scale", "0.001", "-o", "p.txtpb"}, dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "pipeplan profile: error: bad.pb: rank 1, action 1 (1F0): ends before it starts "
            "(start 1, end 0.5)\n");
  EXPECT_EQ(dir.Read("p.txtpb"), "untouched");
}

// A trace of three profiled steps gives a profile of the three, not of the median one alone
// (examples/traces: one H200 rank, interleaved-zb V = 4, M = 8).
TEST(CliProfile, ATraceImportProfilesEveryStep) {
  ScratchDir dir;
  Ok(RunPipeplan({"plan", "--strategy", "interleaved-zb", "--ranks", "1", "--stages-per-rank", "4",
                  "--microbatches", "8", "-o", "izb.pb"},
                 dir.path()));
  const std::string trace = std::string(PIPEPLAN_TEST_DATA_DIR) +
                            "/../../examples/traces/h200_interleaved_zb_rank0.json.gz";
  const RunResult imported = RunPipeplan({"import", "--format", "torch-trace", trace, "--plan",
                                          "izb.pb", "-o", "m.pb", "--profile-output", "all.txtpb"},
                                         dir.path());
  Ok(imported);
  EXPECT_NE(imported.out.find("wrote a profile of all 3 steps to all.txtpb"), std::string::npos)
      << imported.out;
  const std::string text = dir.Read("all.txtpb");
  const StatusOr<Profile> all = ParseProfile(text, ProtoFormat::kText);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->steps, 3);
  ASSERT_EQ(all->stages.size(), 4u);
  // Each stage ran F for 8 microbatches in each of the 3 steps.
  for (const StageProfile& stage : all->stages) EXPECT_EQ(stage.forward.samples, 24);
  // The median step alone, through 'profile', has a third of the samples.
  Ok(RunPipeplan({"profile", "m.pb", "-o", "one.txtpb"}, dir.path()));
  const StatusOr<Profile> one = ParseProfile(dir.Read("one.txtpb"), ProtoFormat::kText);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->steps, 1);
  EXPECT_EQ(one->stages.front().forward.samples, 8);
  // The flag is for traces only.
  const RunResult csv = RunPipeplan(
      {"import", "--format", "torch-csv", "x.csv", "--profile-output", "p.txtpb"}, dir.path());
  EXPECT_EQ(csv.exit_code, 2);
  EXPECT_NE(csv.err.find("--profile-output is for --format torch-trace"), std::string::npos)
      << csv.err;
}

TEST(CliCalibrate, ErrorsAndUsage) {
  ScratchDir dir;
  // Stage 1 has F but no backward of any kind.
  dir.Write("p.txtpb",
            "steps: 1\n"
            "stages { forward { samples: 1 median: 1 min: 1 max: 1 p10: 1 p90: 1 }\n"
            "         backward { samples: 1 median: 2 min: 2 max: 2 p10: 2 p90: 2 } }\n"
            "stages { forward { samples: 1 median: 1 min: 1 max: 1 p10: 1 p90: 1 } }\n"
            "boundaries {}\n");
  const RunResult missing = RunPipeplan({"calibrate", "p.txtpb", "-o", "c.txtpb"}, dir.path());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err,
            "pipeplan calibrate: error: p.txtpb: profile stage 1: no backward measured (B, or I "
            "and W)\n");
  EXPECT_FALSE(dir.Exists("c.txtpb"));

  dir.Write("bad.txtpb", "stages { forward { samples: 2 median: 3 min: 4 } }\n");
  const RunResult invalid = RunPipeplan({"calibrate", "bad.txtpb"}, dir.path());
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_EQ(invalid.err,
            "pipeplan calibrate: error: bad.txtpb: profile file: stages[0].forward: min 4 is "
            "above p10 0\n");

  const std::vector<std::pair<std::vector<std::string>, std::string>> usage = {
      {{"calibrate"}, "missing the profile file (pipeplan calibrate PROFILE [PROFILE ...])"},
      {{"calibrate", "p.txtpb", "--unit", "min"}, "--unit: unknown unit 'min' (s, ms, us or ns)"},
      {{"calibrate", "p.txtpb", "--input-share", "1.5"}, "--input-share must be in [0, 1]"},
      {{"profile"}, "missing the timeline files (pipeplan profile TIMELINE...)"},
      {{"profile", "t.pb", "--time-scale", "0"}, "--time-scale must be positive"},
  };
  for (const auto& [args, message] : usage) {
    const RunResult result = RunPipeplan(args, dir.path());
    EXPECT_EQ(result.exit_code, 2) << message;
    EXPECT_TRUE(result.err.starts_with("pipeplan " + args[0] + ": error: " + message + "\n"))
        << result.err;
  }
}

// A profile in bytes whose stages told their data apart: the calibrated file keeps each stage's
// own static bytes and gives the data (stage 0's inputs, stage 1's targets) to the chain's
// ends, and calibrate's summary says so.
TEST(CliCalibrate, TheDataGoToTheChainsEndsAndTheSummarySaysSo) {
  ScratchDir dir;
  const std::string one = "{ samples: 1 min: 10 p10: 10 median: 10 p90: 10 max: 10 }";
  const std::string kept = "{ samples: 1 min: 1000 p10: 1000 median: 1000 p90: 1000 max: 1000 }";
  const auto stage = [&](const std::string& data) {
    return "stages { forward " + one + " backward " + one + " memory { kept_by_forward " + kept +
           " freed_by_backward " + kept + " microbatches: 4 " + data + " } }\n";
  };
  dir.Write("profile.txtpb",
            "source: \"test\" steps: 1\n" + stage("static_bytes: 1500 input_bytes: 400") +
                stage("static_bytes: 2500 target_bytes: 700") +
                "boundaries {}\nstatic_bytes: [1700, 2800] own_static_bytes: [200, 300]\n");
  const RunResult calibrate =
      RunPipeplan({"calibrate", "profile.txtpb", "-o", "costs.txtpb"}, dir.path());
  Ok(calibrate);
  EXPECT_NE(calibrate.out.find("besides its stages': 0 1.07 KiB, 1 1.76 KiB; data per "
                               "microbatch: the first stage 100 B, the last 175 B\n"),
            std::string::npos)
      << calibrate.out;
  const CostModel costs = ReadCosts(dir, "costs.txtpb");
  ASSERT_TRUE(costs.memory.has_value());
  EXPECT_EQ(costs.memory->stages[0].static_bytes, 1100);
  EXPECT_EQ(costs.memory->stages[1].static_bytes, 1800);
  EXPECT_EQ(costs.memory->first_stage_data_per_microbatch, 100);  // 400 B for 4 microbatches
  EXPECT_EQ(costs.memory->last_stage_data_per_microbatch, 175);

  // Data above the stage's static bytes are refused, naming the field; nothing is written.
  dir.Write("bad.txtpb",
            "source: \"test\" steps: 1\n" + stage("static_bytes: 300 input_bytes: 400") +
                stage("static_bytes: 2500 target_bytes: 700") +
                "boundaries {}\nstatic_bytes: [1700, 2800] own_static_bytes: [200, 300]\n");
  const RunResult bad =
      RunPipeplan({"calibrate", "bad.txtpb", "-o", "bad-costs.txtpb"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.err.find("stages[0].memory.input_bytes + stages[0].memory.target_bytes: 400 are "
                         "above static_bytes 300"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(dir.Exists("bad-costs.txtpb"));
}

}  // namespace
}  // namespace pipeplan::cli_test
