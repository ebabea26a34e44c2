// The loop profile -> cost model -> simulation, judged out of sample: 1f1b (and dualpipe) on
// 2 ranks (one intra-op thread each) on the built-in model is profiled with `pipeplan-torch profile
// --timeline` (run A), calibrated into a cost model, and the same plan simulated with it must
// predict the median step of the next run of the same command (run B). This VM's speed drifts
// between runs seconds apart (a run's median step is 32-69 ms for the same work), far more than
// within one, so one pair says little; an attempt is the median error of kPairs pairs. The bars
// are what this machine meets (docs/torch.md, "Calibration accuracy"): 25% for ranks as threads
// of one process, 30% for two processes over Gloo: they catch gross errors, not small ones
// (without the calibrated receive overhead the Gloo median is +25% to +54%, not always over
// its bar). Each pair also prints the in-sample error (run A against its own calibration) and
// the simulation without the overhead.
// Runs on its own (RUN_SERIAL): other tests on the 2 cores would skew it. An attempt during
// which the VM's host stole CPU time counts neither way (host_steal.h), and a case with no
// quiet attempt is skipped with the steal figures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "host_steal.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using pipeplan::testing::TimingAttempts;

constexpr int kPairs = 5;  // calibrate-then-predict pairs per attempt, judged by their median
constexpr int kQuietAttempts = 2;  // misses on a quiet machine before the test fails
constexpr int kMaxAttempts = 5;    // attempts in all, counting those the host disturbed

// Big enough that compute, not the per-message cost, fills the step (F ~1 ms here).
const std::vector<std::string> kModelFlags = {"--hidden",           "128", "--sequence", "32",
                                              "--layers-per-stage", "2",   "--threads",  "1"};

// How the two ranks run: in-process threads or Gloo processes, and the plan's strategy.
struct Launch {
  const char* name;
  std::vector<std::string> flags;
  double tolerance;  // on the median error of kPairs pairs
  const char* strategy = "1f1b";
};

PlanRequest TwoRankRequest(const char* strategy) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = 2;
  request.topology.microbatches = 8;
  request.topology.stages_per_rank = 0;  // the strategy's own V
  return request;
}

std::vector<std::string> ToolArgs(std::vector<std::string> args) {
  args.insert(args.end(), kModelFlags.begin(), kModelFlags.end());
  return args;
}

// What one profiled run gives: the cost model calibrated from it and its median step (us).
struct ProfiledRun {
  CostModel costs;
  double measured = 0.0;
};

// Profiles `plan_path` once with its measured timeline (files named after `tag`) and
// calibrates.
StatusOr<ProfiledRun> ProfileOnce(const std::string& plan_path, const std::string& dir,
                                  const std::string& tag, const Launch& launch) {
  const std::string profile_path = dir + "/" + tag + "-profile.pb";
  const std::string timeline_path = dir + "/" + tag + "-measured.pb";
  std::vector<std::string> args = {"profile",     "--plan",    plan_path,   "--steps",
                                   "9",           "--timeout", "60",        "--timeline",
                                   timeline_path, "-o",        profile_path};
  args.insert(args.end(), launch.flags.begin(), launch.flags.end());
  const testing::CommandResult profile = testing::RunTorchTool(ToolArgs(args));
  if (profile.exit_code != 0) return Internal("profile failed:\n" + profile.output);

  PIPEPLAN_ASSIGN_OR_RETURN(const std::string profile_bytes, testing::ReadFile(profile_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const Profile parsed,
                            ParseProfile(profile_bytes, ProtoFormat::kBinary));
  ProfiledRun run;
  PIPEPLAN_ASSIGN_OR_RETURN(run.costs,
                            Calibrate(parsed, CalibrateOptions{.unit = TimeUnit::kMicroseconds}));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string timeline_bytes, testing::ReadFile(timeline_path));
  PIPEPLAN_ASSIGN_OR_RETURN(const TimelineFile measured,
                            ParseTimelineFile(timeline_bytes, ProtoFormat::kBinary));
  run.measured = measured.timeline.metrics.makespan;
  return run;
}

// The step `plan` takes under `costs`, with the receive overhead as calibrated or set to 0.
StatusOr<double> SimulatedStep(Plan plan, const CostModel& costs, bool with_overhead) {
  plan.request.costs = costs;
  if (!with_overhead) {
    for (BoundaryCosts& b : plan.request.costs.boundaries) b.receive_overhead = 0;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const Timeline simulated, Simulate(plan));
  return simulated.metrics.makespan;
}

// One attempt: run A calibrates, run B (the next run of the same command) is predicted.
struct Comparison {
  double simulated = 0.0;  // from A's costs
  double measured = 0.0;   // B's median step
  double in_sample = 0.0;  // A's own median step, for the print
  double simulated_without_overhead = 0.0;
  BoundaryCosts boundary;  // A's calibrated boundary (us)
};

StatusOr<Comparison> CalibrateThenPredict(const Plan& plan, const std::string& plan_path,
                                          const std::string& dir, const Launch& launch) {
  PIPEPLAN_ASSIGN_OR_RETURN(const ProfiledRun a, ProfileOnce(plan_path, dir, "a", launch));
  PIPEPLAN_ASSIGN_OR_RETURN(const ProfiledRun b, ProfileOnce(plan_path, dir, "b", launch));
  Comparison out{
      .measured = b.measured, .in_sample = a.measured, .boundary = a.costs.boundaries.front()};
  PIPEPLAN_ASSIGN_OR_RETURN(out.simulated, SimulatedStep(plan, a.costs, true));
  PIPEPLAN_ASSIGN_OR_RETURN(out.simulated_without_overhead, SimulatedStep(plan, a.costs, false));
  return out;
}

void PrintTo(const Launch& launch, std::ostream* out) { *out << launch.name; }

std::string LaunchName(const ::testing::TestParamInfo<Launch>& launch) { return launch.param.name; }

class CalibratedSimulation : public ::testing::TestWithParam<Launch> {};

double Median(std::vector<double> values) { return SummarizeDurations(std::move(values)).median; }

double RelativeError(double measured, double simulated) {
  return (measured - simulated) / simulated;
}

TEST_P(CalibratedSimulation, TwoRanksPredictTheNextRun) {
  const Launch& launch = GetParam();
  const testing::TempDir dir("calibration");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Plan> plan = BuildPlan(TwoRankRequest(launch.strategy));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string plan_path = dir.path() + "/plan.pb";
  const StatusOr<std::string> bytes = SerializePlan(*plan, ProtoFormat::kBinary);
  ASSERT_TRUE(bytes.ok());
  std::ofstream(plan_path, std::ios::binary) << *bytes;

  TimingAttempts attempts(launch.tolerance, kMaxAttempts, kQuietAttempts);
  while (attempts.Next()) {
    std::vector<double> errors, in_sample, without_overhead;
    for (int pair = 1; pair <= kPairs; ++pair) {
      const StatusOr<Comparison> step = CalibrateThenPredict(*plan, plan_path, dir.path(), launch);
      ASSERT_TRUE(step.ok()) << step.status().message();
      errors.push_back(RelativeError(step->measured, step->simulated));
      in_sample.push_back(RelativeError(step->in_sample, step->simulated));
      without_overhead.push_back(RelativeError(step->measured, step->simulated_without_overhead));
      std::printf(
          "[ calibration ]   pair %d: calibrated on run A %.0f us, run B's median %.0f us: "
          "%+.2f%%; in sample (run A's median %.0f us) %+.2f%%; latency %.0f us, receive "
          "overhead %.0f us; with no overhead %+.2f%%\n",
          pair, step->simulated, step->measured, 100 * errors.back(), step->in_sample,
          100 * in_sample.back(), step->boundary.latency, step->boundary.receive_overhead,
          100 * without_overhead.back());
    }
    const double steal = attempts.Record(Median(errors));
    std::printf(
        "[ calibration ] attempt %d (%s): median of %d pairs %+.2f%% out of sample (bar %.0f%%; "
        "host steal %.1f%%), %+.2f%% in sample, %+.2f%% with no receive overhead\n",
        attempts.attempt(), launch.name, kPairs, 100 * attempts.error(), 100 * launch.tolerance,
        100 * steal, 100 * Median(in_sample), 100 * Median(without_overhead));
  }
  RecordProperty("relative_error_percent", std::to_string(100 * attempts.error()));
  if (!attempts.judged()) {
    GTEST_SKIP() << "the host stole CPU time during every attempt that missed ("
                 << attempts.disturbed() << "); accuracy cannot be judged on this machine now";
  }
  EXPECT_LT(std::abs(attempts.error()), launch.tolerance)
      << "the next run's step is " << 100 * attempts.error() << "% off the calibrated simulation";
}

// DualPipe: two model copies per rank, F&B overlap cells, and the copies' gradient sum at
// the end of the step (not in the simulation).
INSTANTIATE_TEST_SUITE_P(
    InProcess, CalibratedSimulation,
    ::testing::Values(Launch{"threads", {"--transport", "inproc"}, 0.25},
                      Launch{"dualpipe_threads", {"--transport", "inproc"}, 0.25, "dualpipe"}),
    LaunchName);
INSTANTIATE_TEST_SUITE_P(
    Gloo, CalibratedSimulation,
    ::testing::Values(Launch{"processes", {"--local-ranks", "2"}, 0.30},
                      Launch{"dualpipe_processes", {"--local-ranks", "2"}, 0.30, "dualpipe"}),
    LaunchName);

}  // namespace
}  // namespace pipeplan::torch_ext
