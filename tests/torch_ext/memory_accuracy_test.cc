// Predicted against measured peak memory, per rank, in bytes (issue 20's bar). Each case runs
// one strategy at P ranks, M = 2P, on the built-in model (hidden 256, sequence 64, microbatch
// 2; 2P x 2 layers in all, split into P x V stages) as threads of one process with every
// allocation counted (`pipeplan-torch profile --timeline`); the profile is calibrated and the
// same plan simulated with the calibrated memory model. Every rank's predicted peak must be
// within 5% of its measured one. Bytes depend on the order alone but for a sent gradient, freed
// at the sender's first op after its receiver took it: which op that is depends on the
// timing, so a peak may move by one message (128 KiB, under 0.7%) from run to run.
// Then, on that one model at P=4, the measured peaks rank as the papers say (v-min < v-half <
// zbv <= 1f1b < zb-h2, zbv within the messages of an early receive and of the gradients it
// has sent and its receivers not yet taken: see the test), and so do the predictions. The papers
// count activations: the ranking is of each plan's largest peak above static memory (the V shape
// puts the last stage, with the loss's targets, on rank 0 beside the first, so its static memory is
// larger).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/model/stage_recut.h"
#include "pipeplan/planner/make_plan.h"
#include "pipeplan/simulation/simulator.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

constexpr double kTolerance = 0.05;
// One message between stages: [microbatch 2, sequence 64, hidden 256] floats.
constexpr double kMessageBytes = 2.0 * 64 * 256 * 4;

struct Case {
  const char* strategy;
  int ranks;
  int microbatches = 0;  // 0: 2P
};

// Each rank's peak in bytes, predicted and measured, and the same above its static memory.
struct Peaks {
  std::vector<double> predicted = {};
  std::vector<double> measured = {};
  std::vector<double> predicted_above_static = {};
  std::vector<double> measured_above_static = {};
  // Predicted as the papers count: activations alone, each freed by its own backward (no
  // message received or sent), which the order alone decides.
  std::vector<double> predicted_as_papers_count_above_static = {};
};

StatusOr<Plan> PlanFor(const Case& c) {
  PlanRequest request;
  request.strategy = c.strategy;
  request.topology.ranks = c.ranks;
  request.topology.microbatches = c.microbatches > 0 ? c.microbatches : 2 * c.ranks;
  request.topology.stages_per_rank = 0;  // the strategy's own V
  return BuildPlan(request);
}

// One profiled run of `plan`: its profile and its median measured step.
struct ProfiledRun {
  Profile profile;
  Timeline measured;
};

StatusOr<ProfiledRun> ProfileRun(const Plan& plan, const std::string& dir) {
  const std::string plan_path = dir + "/plan.pb";
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string plan_bytes,
                            SerializePlan(plan, ProtoFormat::kBinary));
  std::ofstream(plan_path, std::ios::binary) << plan_bytes;
  // The same model whatever V: 2 layers per rank.
  const int layers_per_stage = plan.request.topology.stages_per_rank == 2 ? 1 : 2;
  const std::string profile_path = dir + "/profile.pb";
  const std::string timeline_path = dir + "/measured.pb";
  const testing::CommandResult run = testing::RunTorchTool({"profile",
                                                            "--plan",
                                                            plan_path,
                                                            "--transport",
                                                            "inproc",
                                                            "--steps",
                                                            "2",
                                                            "--warmup",
                                                            "1",
                                                            "--hidden",
                                                            "256",
                                                            "--sequence",
                                                            "64",
                                                            "--microbatch-size",
                                                            "2",
                                                            "--layers-per-stage",
                                                            std::to_string(layers_per_stage),
                                                            "--timeline",
                                                            timeline_path,
                                                            "-o",
                                                            profile_path});
  if (run.exit_code != 0) return Internal("profile failed:\n" + run.output);
  ProfiledRun out;
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string profile_bytes, testing::ReadFile(profile_path));
  PIPEPLAN_ASSIGN_OR_RETURN(out.profile, ParseProfile(profile_bytes, ProtoFormat::kBinary));
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string timeline_bytes, testing::ReadFile(timeline_path));
  PIPEPLAN_ASSIGN_OR_RETURN(TimelineFile measured,
                            ParseTimelineFile(timeline_bytes, ProtoFormat::kBinary));
  out.measured = std::move(measured.timeline);
  return out;
}

double Largest(const std::vector<double>& peaks) {
  return *std::max_element(peaks.begin(), peaks.end());
}

std::vector<double> PeaksOf(const Timeline& timeline) {
  std::vector<double> peaks;
  for (const RankTimeline& rank : timeline.ranks) peaks.push_back(rank.peak_memory);
  return peaks;
}

StatusOr<Peaks> ProfileAndPredict(const Case& c, const std::string& dir) {
  PIPEPLAN_ASSIGN_OR_RETURN(const Plan plan, PlanFor(c));
  PIPEPLAN_ASSIGN_OR_RETURN(const ProfiledRun run, ProfileRun(plan, dir));
  PIPEPLAN_ASSIGN_OR_RETURN(
      const CostModel costs,
      Calibrate(run.profile, CalibrateOptions{.unit = TimeUnit::kMicroseconds}));
  if (!costs.memory.has_value()) return Internal("the profile counted no memory");
  PIPEPLAN_ASSIGN_OR_RETURN(const Timeline predicted, Simulate(plan, costs, *costs.memory));
  Peaks peaks{.predicted = PeaksOf(predicted), .measured = PeaksOf(run.measured)};
  for (const RankTimeline& rank : predicted.ranks) {
    peaks.predicted_above_static.push_back(rank.peak_activation_memory);
  }
  for (const RankTimeline& rank : run.measured.ranks) {
    peaks.measured_above_static.push_back(rank.peak_activation_memory);
  }
  MemoryModel activations = *costs.memory;
  for (StageMemory& stage : activations.stages) {
    stage.received_input = stage.received_gradient = stage.retained = 0;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const Timeline papers, Simulate(plan, costs, activations));
  for (const RankTimeline& rank : papers.ranks) {
    peaks.predicted_as_papers_count_above_static.push_back(rank.peak_activation_memory);
  }
  return peaks;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& c) {
  std::string name = c.param.strategy;
  std::replace(name.begin(), name.end(), '-', '_');
  return name + "_P" + std::to_string(c.param.ranks);
}

class MemoryPrediction : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryPrediction, EveryRanksPeakIsWithinFivePercentOfMeasured) {
  const testing::TempDir dir("memory");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Peaks> peaks = ProfileAndPredict(GetParam(), dir.path());
  ASSERT_TRUE(peaks.ok()) << peaks.status().message();
  ASSERT_EQ(peaks->measured.size(), peaks->predicted.size());
  for (size_t r = 0; r < peaks->measured.size(); ++r) {
    const double error = (peaks->predicted[r] - peaks->measured[r]) / peaks->measured[r];
    std::printf("[ memory ] %s P=%d rank %zu: predicted %.0f B, measured %.0f B: %+.2f%%\n",
                GetParam().strategy, GetParam().ranks, r, peaks->predicted[r], peaks->measured[r],
                100 * error);
    EXPECT_LT(std::abs(error), kTolerance) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, MemoryPrediction,
                         ::testing::Values(Case{"1f1b", 2}, Case{"1f1b", 4}, Case{"zb-h1", 2},
                                           Case{"zb-h1", 4}, Case{"zb-h2", 2}, Case{"zb-h2", 4},
                                           Case{"zbv", 2}, Case{"zbv", 4}, Case{"v-half", 2},
                                           Case{"v-half", 4}, Case{"v-min", 2}, Case{"v-min", 4},
                                           Case{"dualpipe-v", 2}, Case{"dualpipe-v", 4},
                                           Case{"dualpipe", 2}, Case{"dualpipe", 4}),
                         CaseName);

// A V shape on one rank: each stage's backward hands its input gradient to the previous stage
// in memory, which frees it in its own backward (not at the step's end, as a sent gradient).
// Before that was modelled these were predicted 1.5% to 2.4% high; now within 1%.
class HandOffOnOneRank : public ::testing::TestWithParam<Case> {};

TEST_P(HandOffOnOneRank, PeakIsPredictedWithinOnePercent) {
  const testing::TempDir dir("memory-hand-off");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Peaks> peaks = ProfileAndPredict(GetParam(), dir.path());
  ASSERT_TRUE(peaks.ok()) << peaks.status().message();
  ASSERT_EQ(peaks->measured.size(), 1u);
  const double error = (peaks->predicted[0] - peaks->measured[0]) / peaks->measured[0];
  std::printf("[ memory ] %s P=1 V=2 M=8: predicted %.0f B, measured %.0f B: %+.2f%%\n",
              GetParam().strategy, peaks->predicted[0], peaks->measured[0], 100 * error);
  EXPECT_LT(std::abs(error), 0.01);
}

INSTANTIATE_TEST_SUITE_P(VShapes, HandOffOnOneRank,
                         ::testing::Values(Case{"zbv", 1, 8}, Case{"v-half", 1, 8},
                                           Case{"v-min", 1, 8}, Case{"dualpipe-v", 1, 8}),
                         CaseName);

TEST(MemoryRanking, MeasuredAndPredictedPeaksRankAsThePapersSay) {
  const testing::TempDir dir("memory-ranking");
  ASSERT_FALSE(dir.path().empty());
  std::map<std::string, Peaks> peaks;
  for (const char* strategy : {"v-min", "v-half", "zbv", "1f1b", "zb-h2"}) {
    const StatusOr<Peaks> got = ProfileAndPredict({strategy, 4}, dir.path());
    ASSERT_TRUE(got.ok()) << strategy << ": " << got.status().message();
    std::printf(
        "[ memory ] %s P=4: largest peak above static predicted %.0f B (activations alone, as "
        "the papers count: %.0f B), measured %.0f B\n",
        strategy, Largest(got->predicted_above_static),
        Largest(got->predicted_as_papers_count_above_static), Largest(got->measured_above_static));
    peaks[strategy] = *got;
  }
  using Figures = std::vector<double> Peaks::*;
  for (const Figures figures : {&Peaks::measured_above_static, &Peaks::predicted_above_static}) {
    SCOPED_TRACE(figures == &Peaks::measured_above_static ? "measured" : "predicted");
    const auto of = [&](const char* strategy) { return Largest(peaks[strategy].*figures); };
    EXPECT_LT(of("v-min"), of("v-half"));
    EXPECT_LT(of("v-half"), of("zbv"));
    // The papers count activations alone: zbv's equal 1F1B's. A runtime adds messages, from
    // where it posts their receives: zbv's rank 1 posts one 25 actions before its F, through
    // its peak (the order no rendezvous can deadlock puts it there: docs/planning.md, "Where
    // receives sit"), so zbv's peak is one message above 1F1B's, predicted and measured. A
    // gradient sent stays until its receiver has taken it (then the sender frees it at its
    // next op), and how far a receiver lags depends on the timing (the simulator's, on the
    // calibrated durations): a middle rank may hold one more (2026-11-27, 2-core VM: 1 or 2
    // messages above 1F1B's, measured and predicted).
    EXPECT_LE(of("zbv"), of("1f1b") + 2 * kMessageBytes);
    EXPECT_LT(of("1f1b"), of("zb-h2"));
  }
  // Counting activations alone, as the papers do, the predictions rank zbv at or below 1F1B
  // (by the order alone: 20070400 B against 20071424 B on 2026-11-27). Messages put zbv at
  // least one above that count in every run: the early receive.
  const auto papers = [&](const char* strategy) {
    return Largest(peaks[strategy].predicted_as_papers_count_above_static);
  };
  EXPECT_LE(papers("zbv"), papers("1f1b"));
  EXPECT_GE(Largest(peaks["zbv"].predicted_above_static) - papers("zbv"), 0.99 * kMessageBytes);
}

// Calibrated on a V shape (zbv, P=4, two stages per rank), the memory model predicts a plan that
// places the same model's stages otherwise: ZB-H1 at V=1 (each stage two of the V shape's),
// where rank 0 holds the data and rank 3 the loss's targets, where zbv put both on rank 0.
// Every rank's static memory within 0.5% of measured, its peak within 5% (2026-11-28, 2-core
// VM, the file's eight uniform entries cut by depth as `plan` cuts them: static +0.12%, peaks
// -1.2% to +1.5%; 2026-11-27, one entry as a rank's share: +0.3% to +1.5%; +1.6% to +2.7% while a
// stage of two layers was counted two received inputs, one per half). Carried over per rank as
// measured under the V shape, the static memory would be a data set (1 MiB, 7.6%) high on rank 0
// and as much low on rank 3. ZB-H1, not 1F1B: zbv runs F, I and W, so its profile tells nothing of
// B's transient.
TEST(MemoryAcrossPlacements, CalibratedOnAVShapeAPlanWithOneStagePerRankIsPredicted) {
  const testing::TempDir dir("memory-placements");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Plan> zbv = PlanFor({"zbv", 4});
  ASSERT_TRUE(zbv.ok()) << zbv.status().message();
  const StatusOr<ProfiledRun> v_run = ProfileRun(*zbv, dir.path());
  ASSERT_TRUE(v_run.ok()) << v_run.status().message();
  const StatusOr<CostModel> costs =
      Calibrate(v_run->profile, CalibrateOptions{.unit = TimeUnit::kMicroseconds, .uniform = true});
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_TRUE(costs->memory.has_value());

  const StatusOr<Plan> zb_h1 = PlanFor({"zb-h1", 4});
  ASSERT_TRUE(zb_h1.ok()) << zb_h1.status().message();
  const StatusOr<ProfiledRun> run = ProfileRun(*zb_h1, dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  // The V shape's eight stages cut again for ZB-H1's four, as plan, auto and compare do.
  CostModel durations = *costs;
  const MemoryModel memory = *std::exchange(durations.memory, std::nullopt);  // as a request
  const StatusOr<StageFigures> fitted = FitStageFigures(durations, memory, zb_h1->request.topology);
  ASSERT_TRUE(fitted.ok()) << fitted.status().message();
  const StatusOr<Timeline> predicted = Simulate(*zb_h1, fitted->costs, fitted->memory);
  ASSERT_TRUE(predicted.ok()) << predicted.status().message();
  ASSERT_EQ(predicted->ranks.size(), run->measured.ranks.size());
  for (size_t r = 0; r < predicted->ranks.size(); ++r) {
    const RankTimeline& p = predicted->ranks[r];
    const RankTimeline& m = run->measured.ranks[r];
    const double p_static = p.peak_memory - p.peak_activation_memory;
    const double m_static = m.peak_memory - m.peak_activation_memory;
    std::printf(
        "[ memory ] zb-h1 P=4 from zbv's calibration, rank %zu: static predicted %.0f B, "
        "measured %.0f B; peak predicted %.0f B, measured %.0f B: %+.2f%%\n",
        r, p_static, m_static, p.peak_memory, m.peak_memory,
        100 * (p.peak_memory - m.peak_memory) / m.peak_memory);
    EXPECT_NEAR(p_static, m_static, 0.005 * m_static) << "rank " << r;
    EXPECT_NEAR(p.peak_memory, m.peak_memory, kTolerance * m.peak_memory) << "rank " << r;
  }
}

// A budget taken from one measured run (v-half's largest peak + 2%): auto, given the costs
// and memory calibrated from that run, picks a plan whose measured peak then fits it.
TEST(MemoryBudget, AutoUnderABudgetFromOneMeasuredRunPicksAPlanThatFits) {
  const testing::TempDir dir("memory-budget");
  ASSERT_FALSE(dir.path().empty());
  const StatusOr<Plan> measured_plan = PlanFor({"v-half", 4});
  ASSERT_TRUE(measured_plan.ok()) << measured_plan.status().message();
  const StatusOr<ProfiledRun> run = ProfileRun(*measured_plan, dir.path());
  ASSERT_TRUE(run.ok()) << run.status().message();
  const double budget = 1.02 * Largest(PeaksOf(run->measured));
  const StatusOr<CostModel> costs =
      Calibrate(run->profile, CalibrateOptions{.unit = TimeUnit::kMicroseconds, .uniform = true});
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  ASSERT_TRUE(costs->memory.has_value());

  PlanRequest request;
  request.strategy = "auto";
  request.topology.ranks = 4;
  request.topology.microbatches = 8;
  request.topology.stages_per_rank = 2;
  request.costs = *costs;
  request.memory = *costs->memory;
  request.memory.limit = budget;
  const StatusOr<Evaluated> made = MakePlan(request, PlanOptions{});
  ASSERT_TRUE(made.ok()) << made.status().message();
  const Plan* chosen = &made->plan;
  const StatusOr<ProfiledRun> again = ProfileRun(*chosen, dir.path());
  ASSERT_TRUE(again.ok()) << again.status().message();
  const double peak = Largest(PeaksOf(again->measured));
  std::printf(
      "[ memory ] budget %.0f B (v-half's measured peak + 2%%): auto chose %s (V=%d), "
      "measured peak %.0f B\n",
      budget, chosen->request.strategy.c_str(), chosen->request.topology.stages_per_rank, peak);
  EXPECT_LE(peak, budget);
}

}  // namespace
}  // namespace pipeplan::torch_ext
