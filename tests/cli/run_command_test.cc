// End-to-end tests of 'pipeplan run' and 'pipeplan diff': a plan runs on the in-process
// runtime and is compared with its simulation; a plan that would deadlock, a stalled rank and
// a failing rank all end with exit code 1, a message naming the rank and action, and no files.
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan::cli_test {
namespace {

// Ops of 0.5-1 ms: a step of 1f1b P=2 M=4 takes a few milliseconds.
const std::vector<std::string> kFast = {"--time-scale", "0.0005", "--steps", "3", "--warmup", "1"};

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void PlanInto(const ScratchDir& dir, const std::string& strategy, const std::string& file) {
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy", strategy, "--ranks", "2", "--microbatches", "4", "-o", file},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
}

TEST(CliRun, PrintsMeasuredAgainstSimulatedAndWritesTimelineAndReport) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  const RunResult run = RunPipeplan(
      With({"run", "plan.pb", "--timeline", "measured.pb", "--html", "run.html"}, kFast),
      dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("plan.pb: 1f1b, P=2 V=1 M=4; executor synthetic, transport inproc"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("time scale: 0.0005 s per unit\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("steps: 1 warm-up + 3 measured; median step"), std::string::npos);
  // Column widths follow the numbers; the header's words are what matters.
  const size_t header = run.out.find("\nstep time  simulated  measured  ");
  ASSERT_NE(header, std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nmakespan ", header), std::string::npos) << run.out;
  for (const char* kind : {"\nF ", "\nB "}) {
    EXPECT_NE(run.out.find(kind), std::string::npos) << kind << " row missing:\n" << run.out;
  }
  EXPECT_NE(run.out.find("wrote measured.pb\nwrote run.html\n"), std::string::npos);
  for (const char* step : {"step 1/4 (warm-up): ", "step 2/4: ", "step 4/4: "}) {
    EXPECT_NE(run.err.find(step), std::string::npos) << run.err;
  }

  // The timeline file carries the plan and a measured timeline of it.
  const std::string content = dir.Read("measured.pb");
  const StatusOr<TimelineFile> file = ParseTimelineFile(content, ProtoFormat::kBinary);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(file->plan.has_value());
  EXPECT_EQ(file->timeline.source, TimelineSource::kMeasured);
  ASSERT_EQ(file->timeline.ranks.size(), 2u);
  EXPECT_EQ(file->timeline.ranks[1].actions.size(), file->plan->programs[1].actions.size());
  EXPECT_GT(file->timeline.metrics.makespan, 0.0);

  const std::string html = dir.Read("run.html");
  EXPECT_NE(html.find("simulated vs measured"), std::string::npos);
  EXPECT_NE(html.find("measured timeline"), std::string::npos);
}

TEST(CliDiff, ComparesASimulatedWithAMeasuredTimeline) {
  ScratchDir dir;
  PlanInto(dir, "zb-h1", "plan.pb");
  ASSERT_EQ(RunPipeplan({"simulate", "plan.pb", "--timeline", "sim.txtpb"}, dir.path()).exit_code,
            0);
  ASSERT_EQ(
      RunPipeplan(With({"run", "plan.pb", "--timeline", "run.json"}, kFast), dir.path()).exit_code,
      0);
  const RunResult diff =
      RunPipeplan({"diff", "sim.txtpb", "run.json", "--html", "diff.html"}, dir.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_TRUE(diff.out.starts_with("sim.txtpb (simulated) vs run.json (measured)\n")) << diff.out;
  for (const char* text : {"makespan", "busy simulated", "\nI ", "\nW ", "furthest off: rank "}) {
    EXPECT_NE(diff.out.find(text), std::string::npos) << text << "\n" << diff.out;
  }
  EXPECT_TRUE(dir.Exists("diff.html"));
  // Neither counts bytes: no peaks to put side by side.
  EXPECT_EQ(diff.out.find("peak memory"), std::string::npos) << diff.out;

  // A timeline diffed with itself has no error at all.
  const RunResult same = RunPipeplan({"diff", "sim.txtpb", "sim.txtpb"}, dir.path());
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("+0.0%"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("mean |start error| over all compute actions: 0\n"), std::string::npos);
}

// Two simulations of one 1F1B plan with memory models in bytes (static 10 MiB; an F keeps
// 1 MiB, then 2 MiB): rank 0 peaks at 10 + 2 x 1 and 10 + 2 x 2 MiB, rank 1 at 11 and 12.
TEST(CliDiff, PutsPeaksInBytesSideBySide) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  for (const auto& [name, activation] : {std::pair{"one", "1048576"}, {"two", "2097152"}}) {
    dir.Write(std::string(name) + ".txtpb", std::string("stages { forward: 1 backward: 2 }\n"
                                                        "memory { stages { activation: ") +
                                                activation +
                                                " } static_per_rank: 10485760 unit: \"bytes\" }\n");
    const RunResult simulated =
        RunPipeplan({"simulate", "plan.pb", "--costs", std::string(name) + ".txtpb", "--timeline",
                     std::string(name) + ".pb"},
                    dir.path());
    ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  }
  const RunResult diff = RunPipeplan({"diff", "one.pb", "two.pb", "--html", "d.html"}, dir.path());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  const size_t table = diff.out.find("peak memory first");  // two simulated timelines
  ASSERT_NE(table, std::string::npos) << diff.out;
  // The two lines under the header: ranks 0 and 1.
  const size_t rank0 = diff.out.find('\n', table) + 1;
  const size_t rank1 = diff.out.find('\n', rank0) + 1;
  ASSERT_NE(rank1, std::string::npos) << diff.out;
  const std::string row0 = diff.out.substr(rank0, rank1 - rank0);
  const std::string row1 = diff.out.substr(rank1, diff.out.find('\n', rank1) - rank1);
  for (const char* text : {"12.0 MiB", "14.0 MiB", "+16.7%"}) {
    EXPECT_NE(row0.find(text), std::string::npos) << text << " not in: " << row0;
  }
  for (const char* text : {"11.0 MiB", "12.0 MiB", "+9.1%"}) {
    EXPECT_NE(row1.find(text), std::string::npos) << text << " not in: " << row1;
  }
  // The report draws both memory curves of each rank.
  const std::string html = dir.Read("d.html");
  EXPECT_NE(html.find("Memory per rank"), std::string::npos);
  EXPECT_NE(html.find("data-rank=\"1\" data-name=\"second\""), std::string::npos) << html;
}

TEST(CliDiff, RefusesTimelinesOfDifferentPlansOrWithoutOne) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "a.pb");
  PlanInto(dir, "gpipe", "b.pb");
  ASSERT_EQ(RunPipeplan({"simulate", "a.pb", "--timeline", "a.tl"}, dir.path()).exit_code, 0);
  ASSERT_EQ(RunPipeplan({"simulate", "b.pb", "--timeline", "b.tl"}, dir.path()).exit_code, 0);
  const RunResult mixed = RunPipeplan({"diff", "a.tl", "b.tl"}, dir.path());
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_EQ(mixed.err,
            "pipeplan diff: error: a.tl and b.tl are timelines of different plans "
            "(their action lists differ)\n");
  dir.Write("bare.txtpb", "source: SIMULATED\n");
  const RunResult bare = RunPipeplan({"diff", "bare.txtpb", "bare.txtpb"}, dir.path());
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_EQ(bare.err,
            "pipeplan diff: error: neither bare.txtpb nor bare.txtpb carries its plan; write "
            "them with 'pipeplan simulate PLAN --timeline FILE' and 'pipeplan run PLAN "
            "--timeline FILE'\n");
  const RunResult one = RunPipeplan({"diff", "a.tl"}, dir.path());
  EXPECT_EQ(one.exit_code, 2);
}

// Rank 0 waits for the gradient of mb 0 before sending mb 1; rank 1 runs F1 before B0.
Plan DeadlockingPlan() {
  PlanRequest request;
  request.topology.ranks = 2;
  request.topology.microbatches = 2;
  StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok());
  auto at = [](ActionKind kind, int stage, int mb, int peer = 0) {
    Action action = MakeCompute(kind, StageId(stage), MicrobatchId(mb));
    action.peer = RankId(peer);
    return action;
  };
  using K = ActionKind;
  plan->programs[0].actions = {at(K::kForward, 0, 0),         at(K::kSendForward, 0, 0, 1),
                               at(K::kForward, 0, 1),         at(K::kRecvBackward, 0, 0, 1),
                               at(K::kBackward, 0, 0),        at(K::kSendForward, 0, 1, 1),
                               at(K::kRecvBackward, 0, 1, 1), at(K::kBackward, 0, 1)};
  plan->programs[1].actions = {at(K::kRecvForward, 1, 0, 0), at(K::kForward, 1, 0),
                               at(K::kRecvForward, 1, 1, 0), at(K::kForward, 1, 1),
                               at(K::kBackward, 1, 0),       at(K::kSendBackward, 1, 0, 0),
                               at(K::kBackward, 1, 1),       at(K::kSendBackward, 1, 1, 0)};
  return *plan;
}

// --steps-svg: the first three measured steps on the run's clock, each step's microbatches
// numbered on (M = 4: the third step's are 8 to 11).
TEST(CliRun, DrawsTheFirstMeasuredStepsOneAfterAnother) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  for (const bool barrier : {true, false}) {
    std::vector<std::string> args = With({"run", "plan.pb", "--steps-svg", "steps.svg"}, kFast);
    if (!barrier) args.emplace_back("--no-step-barrier");
    const RunResult run = RunPipeplan(args, dir.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("wrote steps.svg\n"), std::string::npos) << run.out;
    const std::string svg = dir.Read("steps.svg");
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
    EXPECT_NE(svg.find(std::string("plan.pb: measured steps 2 to 4, ") +
                       (barrier ? "each opened by the step barrier" : "no step barrier")),
              std::string::npos);
    EXPECT_NE(svg.find(">11</text>"), std::string::npos) << "the third step's last microbatch";
    EXPECT_EQ(svg.find(">12</text>"), std::string::npos) << "a fourth step drawn";
  }
}

TEST(CliRun, ABadOutputPathIsNamedBeforeTheRunNotAfterIt) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  dir.Write("out/keep", "");  // out/ is a directory
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps-svg", "out"}, "cannot write 'out': is a directory"},
      {{"--timeline", "plan.pb"}, "cannot write 'plan.pb': it is an input of this command"},
      {{"--html", "r.html", "--steps-svg", "r.html"}, "'r.html' is given for two outputs"},
  };
  for (const auto& [flags, message] : cases) {
    const RunResult run = RunPipeplan(With(With({"run", "plan.pb"}, kFast), flags), dir.path());
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("step 1/4"), std::string::npos) << "ran before refusing:\n" << run.err;
    EXPECT_FALSE(dir.Exists("r.html"));
  }
}

TEST(CliRun, RefusesAPlanThatWouldDeadlockAndWritesNothing) {
  ScratchDir dir;
  const StatusOr<std::string> text = SerializePlan(DeadlockingPlan(), ProtoFormat::kText);
  ASSERT_TRUE(text.ok());
  dir.Write("edited.txtpb", *text);
  const RunResult run = RunPipeplan(
      With({"run", "edited.txtpb", "--timeline", "t.pb", "--html", "r.html"}, kFast), dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "pipeplan run: error: refusing to launch an invalid plan: deadlock: rank 0, action 3 "
            "(0RECV_B0) waits for rank 1; rank 1, action 2 (1RECV_F1) waits for rank 0\n");
  EXPECT_FALSE(dir.Exists("t.pb"));
  EXPECT_FALSE(dir.Exists("r.html"));
}

TEST(CliRun, AStalledRankIsReportedWithinTheTimeout) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  // Rank 1's program is RECV_F0, F0, ...: action 1 is its first forward.
  const RunResult run = RunPipeplan(With({"run", "plan.pb", "--timeout", "0.3", "--inject-fault",
                                          "stall@1:1:1", "--timeline", "t.pb"},
                                         kFast),
                                    dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("pipeplan run: error: stalled: rank 1, action 1 (1F0) has been running"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("(no progress for the 0.3 s timeout)"), std::string::npos) << run.err;
  EXPECT_FALSE(dir.Exists("t.pb"));
}

TEST(CliRun, AFailingRankAbortsTheOthers) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  const RunResult run =
      RunPipeplan(With({"run", "plan.pb", "--inject-fault", "throw@0:0:2"}, kFast), dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("pipeplan run: error: rank 0, action 0 (0F0): the executor threw: "
                         "injected exception"),
            std::string::npos)
      << run.err;
}

TEST(CliRun, RejectsBadFlagsAsUsageErrors) {
  ScratchDir dir;
  PlanInto(dir, "1f1b", "plan.pb");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "plan.pb", "--executor", "torch"},
       "--executor: unknown executor 'torch' (this build has: synthetic)"},
      {{"run", "plan.pb", "--transport", "nccl"},
       "--transport: unknown transport 'nccl' (this build has: inproc)"},
      {{"run", "plan.pb", "--time-scale", "0"}, "--time-scale must be positive"},
      {{"run", "plan.pb", "--timeout", "0"}, "--timeout must be positive"},
      {{"run", "plan.pb", "--inject-fault", "hang@1:2"},
       "--inject-fault: fault 'hang@1:2': unknown kind 'hang' (expected KIND@RANK:ACTION[:STEP], "
       "KIND one of fail, throw, stall, crash, truncate)"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult run = RunPipeplan(args, dir.path());
    EXPECT_EQ(run.exit_code, 2) << message;
    EXPECT_TRUE(run.err.starts_with("pipeplan run: error: " + message + "\n")) << run.err;
  }
  const RunResult not_compute =
      RunPipeplan({"run", "plan.pb", "--inject-fault", "fail@0:1"}, dir.path());
  EXPECT_EQ(not_compute.exit_code, 1);
  EXPECT_EQ(not_compute.err,
            "pipeplan run: error: --inject-fault: rank 0, action 1 is 0SEND_F0, not a compute "
            "action\n");
  const RunResult crash =
      RunPipeplan({"run", "plan.pb", "--inject-fault", "crash@0:0"}, dir.path());
  EXPECT_EQ(crash.exit_code, 1);
  EXPECT_NE(crash.err.find("a crash needs one process per rank"), std::string::npos) << crash.err;
}

// The synthetic runtime fails step 3's post-validation: every rank drains and replays, the
// run ends well, and the step's time is printed beside the others'.
TEST(CliRun, AFailedValidationIsReplayedAndItsStepTimedBesideTheOthers) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "2", "--microbatches",
                                      "4", "--post-validation", "-o", "zbv.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult run = RunPipeplan(
      With({"run", "zbv.pb", "--inject-validation-failure", "3", "--html", "run.html"}, kFast),
      dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("the table below, --timeline and --html show step 3"), std::string::npos)
      << run.out;
  // The report shows the failing step, its discarded first runs hatched.
  EXPECT_NE(dir.Read("run.html").find("class=\"pp-discarded\""), std::string::npos);
  EXPECT_NE(run.err.find("step 3/4: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" (validation failed: replayed)\n"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("step 3 (failed validation, forwards before each PV replayed): "),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("; the other steps: median "), std::string::npos) << run.out;

  PlanInto(dir, "1f1b", "plain.pb");
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"run", "zbv.pb", "--inject-validation-failure", "0"}, "--inject-validation-failure"},
      {{"run", "zbv.pb", "--inject-validation-failure", "x"}, "--inject-validation-failure"},
      {{"run", "zbv.pb", "--steps", "2", "--warmup", "1", "--inject-validation-failure", "4"},
       "--inject-validation-failure: step 4 is outside the run (steps 1 to 3)"},
      {{"run", "plain.pb", "--inject-validation-failure", "1"},
       "--inject-validation-failure: the plan has no post-validation"},
  };
  for (const auto& [args, message] : refused) {
    const RunResult bad = RunPipeplan(args, dir.path());
    EXPECT_NE(bad.exit_code, 0) << message;
    EXPECT_NE(bad.err.find("pipeplan run: error: " + message), std::string::npos) << bad.err;
    EXPECT_EQ(bad.err.find("step 1/"), std::string::npos) << "a step ran: " << bad.err;
  }
}

}  // namespace
}  // namespace pipeplan::cli_test
