// The loop profile -> cost model -> simulation, judged against the machine (issue 5's bar):
// 1f1b on 2 ranks (Gloo processes, one intra-op thread each) on the built-in model is
// profiled with `pipeplan-torch profile`, calibrated into a cost model, and the same plan is
// simulated with it; a separate `pipeplan-torch run` measures the median step. The two must
// agree within 10%. Runs on its own (RUN_SERIAL): other tests on the 2 cores would skew it.
// An attempt during which the VM's host stole CPU time counts neither way (host_steal.h),
// and a case with no quiet attempt is skipped with the steal figures; the bar stays 10%.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "host_steal.h"
#include "pipeplan/planner/calibrate.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/planner/proto_io.h"
#include "pipeplan/planner/simulator.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using pipeplan::testing::TimingAttempts;

constexpr double kTolerance = 0.10;
constexpr int kQuietAttempts = 2;  // misses on a quiet machine before the test fails
constexpr int kMaxAttempts = 5;    // attempts in all, counting those the host disturbed

// Big enough that compute, not Gloo's per-message cost, fills the step (F ~1-2 ms here).
const std::vector<std::string> kModelFlags = {"--hidden",           "128", "--sequence", "32",
                                              "--layers-per-stage", "2",   "--threads",  "1"};

PlanRequest OneF1BRequest() {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 8;
  return request;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> ToolArgs(std::vector<std::string> args) {
  args.insert(args.end(), kModelFlags.begin(), kModelFlags.end());
  return args;
}

// Profiles `plan` (stored at `plan_path`), calibrates, and simulates the same plan with the
// calibrated costs ('pipeplan simulate PLAN --costs'): the predicted step in microseconds.
StatusOr<double> CalibratedMakespan(Plan plan, const std::string& plan_path,
                                    const std::string& dir) {
  const std::string profile_path = dir + "/profile.pb";
  const testing::CommandResult profile =
      testing::RunTorchTool(ToolArgs({"profile", "--plan", plan_path, "--local-ranks", "2",
                                      "--timeout", "60", "-o", profile_path}));
  if (profile.exit_code != 0) return Internal("profile failed:\n" + profile.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(profile_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const Profile parsed, ParseProfile(bytes, ProtoFormat::kBinary));
  PIPEPLAN_ASSIGN_OR_RETURN(plan.request.costs,
                            Calibrate(parsed, CalibrateOptions{.unit = TimeUnit::kMicroseconds}));
  PIPEPLAN_ASSIGN_OR_RETURN(const Timeline simulated, Simulate(plan));
  return simulated.metrics.makespan;
}

// Runs `plan_path` and returns the measured median step time in microseconds.
StatusOr<double> MeasuredMakespan(const std::string& plan_path, const std::string& dir) {
  const std::string timeline_path = dir + "/measured.pb";
  const testing::CommandResult run = testing::RunTorchTool(
      ToolArgs({"run", "--plan", plan_path, "--local-ranks", "2", "--steps", "5", "--warmup", "2",
                "--timeout", "60", "--timeline", timeline_path}));
  if (run.exit_code != 0) return Internal("run failed:\n" + run.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(timeline_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineFile file,
                            ParseTimelineFile(bytes, ProtoFormat::kBinary));
  return file.timeline.metrics.makespan;
}

TEST(CalibratedSimulation, OneF1BOnTwoRanksIsWithinTenPercentOfMeasured) {
  const testing::TempDir dir("calibration");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Plan> plan = BuildPlan(OneF1BRequest());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string plan_path = dir.path() + "/plan.pb";
  const StatusOr<std::string> bytes = SerializePlan(*plan, ProtoFormat::kBinary);
  ASSERT_TRUE(bytes.ok());
  std::ofstream(plan_path, std::ios::binary) << *bytes;

  TimingAttempts attempts(kTolerance, kMaxAttempts, kQuietAttempts);
  while (attempts.Next()) {
    const StatusOr<double> want = CalibratedMakespan(*plan, plan_path, dir.path());
    ASSERT_TRUE(want.ok()) << want.status().message();
    const StatusOr<double> got = MeasuredMakespan(plan_path, dir.path());
    ASSERT_TRUE(got.ok()) << got.status().message();
    const double steal = attempts.Record((*got - *want) / *want);
    std::printf(
        "[ calibration ] attempt %d: calibrated simulation %.0f us, measured median %.0f us: "
        "%+.2f%% (host steal %.1f%%)\n",
        attempts.attempt(), *want, *got, 100 * attempts.error(), 100 * steal);
  }
  RecordProperty("relative_error_percent", std::to_string(100 * attempts.error()));
  if (!attempts.judged()) {
    GTEST_SKIP() << "the host stole CPU time during every attempt that missed (steal"
                 << attempts.disturbed() << "); accuracy cannot be judged on this machine now";
  }
  EXPECT_LT(std::abs(attempts.error()), kTolerance)
      << "measured " << 100 * attempts.error() << "% off the simulation";
}

}  // namespace
}  // namespace pipeplan::torch_ext
