// Clipping to a global gradient norm and skipping a non-finite step, through pipeplan-torch
// (--clip-grad-norm, --inject-nonfinite, --metrics): the norm is torch's clip_grad_norm_ of
// the step's gradients; every strategy clips in the same steps and trains the same; a NaN
// step is skipped on every rank and the run goes on as if it had never been; bad values are
// refused naming the flag. With post-validation the update is speculative, judged at the next
// step's PV, and the parameters after every step equal the synchronous 1f1b run's, over Gloo
// and as threads whose steps follow each other without a barrier.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/torch_ext/stage_dump.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using testing::CommandResult;
using testing::ReadFile;
using testing::RunTorchTool;
using testing::TempDir;

// One --metrics line.
struct Metric {
  int step = 0;
  int rank = 0;
  std::optional<double> loss;
  std::optional<double> norm;
  bool clipped = false;
  bool skipped = false;
  bool rolled_back = false;
  int replayed_forwards = 0;
};

std::optional<double> NumberOrNull(simdjson::ondemand::value value) {
  if (value.is_null()) return std::nullopt;
  return double(value.get_double());
}

std::vector<Metric> ReadMetrics(const std::string& path) {
  const StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().message();
  std::vector<Metric> metrics;
  if (!text.ok()) return metrics;
  std::istringstream lines(*text);
  std::string line;
  simdjson::ondemand::parser parser;
  while (std::getline(lines, line)) {
    simdjson::padded_string padded(line);
    simdjson::ondemand::document doc = parser.iterate(padded);
    Metric m;
    m.step = int(int64_t(doc["step"]));
    m.rank = int(int64_t(doc["rank"]));
    m.loss = NumberOrNull(doc["loss"].value());
    m.norm = NumberOrNull(doc["global_grad_norm"].value());
    m.clipped = bool(doc["clipped"]);
    m.skipped = bool(doc["skipped"]);
    m.rolled_back = bool(doc["rolled_back"]);
    m.replayed_forwards = int(int64_t(doc["replayed_forwards"]));
    metrics.push_back(m);
  }
  return metrics;
}

std::string WritePlan(const TempDir& dir, const std::string& strategy, int ranks,
                      int stages_per_rank, bool post_validation = false) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = 8;
  request.options.post_validation = post_validation;
  const StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  const std::string path = dir.path() + "/" + strategy + (post_validation ? "-pv" : "") + ".pb";
  std::ofstream(path, std::ios::binary) << SerializePlan(*plan, ProtoFormat::kBinary).value();
  return path;
}

// Runs `plan` for 4 steps (no warm-up), AdamW, with `flags`; returns its metrics.
std::vector<Metric> Train(const TempDir& dir, const std::string& plan, const std::string& name,
                          std::vector<std::string> flags) {
  const std::string metrics = dir.path() + "/" + name + ".jsonl";
  std::vector<std::string> args = {"run",         plan,    "--steps", "4",    "--warmup",  "0",
                                   "--optimizer", "adamw", "--lr",    "0.01", "--metrics", metrics};
  args.insert(args.end(), flags.begin(), flags.end());
  const CommandResult run = RunTorchTool(args);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return run.exit_code == 0 ? ReadMetrics(metrics) : std::vector<Metric>{};
}

// Each step's line from the rank that holds the last stage (the one with a loss; rank 0 in a
// V shape; under dual placement ranks 0 and P-1 both hold one and report the step's loss: the
// first of them).
std::vector<Metric> LossLines(const std::vector<Metric>& metrics) {
  std::vector<Metric> out;
  for (const Metric& m : metrics) {
    const bool seen = std::ranges::any_of(out, [&](const Metric& o) { return o.step == m.step; });
    if (m.loss.has_value() && !seen) out.push_back(m);
  }
  return out;
}

void ExpectNear(double got, double want, double relative, const std::string& what) {
  EXPECT_LE(std::abs(got - want), relative * std::abs(want))
      << what << ": " << got << " vs " << want;
}

// What --dump-params wrote for (step, stage): every parameter, every optimizer state tensor
// and the update count, by name.
std::vector<std::pair<std::string, at::Tensor>> Dumped(const std::string& dir, int step,
                                                       int stage) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  const StatusOr<std::string> bytes = ReadFile(ParameterDumpPath(dir, step, stage));
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  if (!bytes.ok()) return out;
  const StatusOr<c10::impl::GenericDict> dump = DecodeStageDump(*bytes);
  EXPECT_TRUE(dump.ok()) << dump.status().message();
  if (!dump.ok()) return out;
  for (const auto& p : dump->at("params").toGenericDict()) {
    out.emplace_back(p.key().toStringRef(), p.value().toTensor());
  }
  for (const auto& p : dump->at("optimizer_state").toGenericDict()) {
    for (const auto& t : p.value().toGenericDict()) {
      out.emplace_back(p.key().toStringRef() + "." + t.key().toStringRef(), t.value().toTensor());
    }
  }
  out.emplace_back("optimizer_step", at::scalar_tensor(dump->at("optimizer_step").toInt()));
  return out;
}

// Every tensor of `got` within `relative` of `want` (max |difference| over max |want|), or
// bit for bit at 0.
void ExpectSameDump(const std::string& got_dir, const std::string& want_dir, int got_step,
                    int want_step, int stages, double relative, const std::string& what) {
  for (int stage = 0; stage < stages; ++stage) {
    const auto got = Dumped(got_dir, got_step, stage);
    const auto want = Dumped(want_dir, want_step, stage);
    ASSERT_EQ(got.size(), want.size()) << what << ", stage " << stage;
    ASSERT_FALSE(got.empty()) << what << ", stage " << stage;
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string where = what + ", stage " + std::to_string(stage) + ", " + got[i].first;
      ASSERT_EQ(got[i].first, want[i].first) << where;
      if (relative == 0) {
        EXPECT_TRUE(at::equal(got[i].second, want[i].second)) << where << " differs";
        continue;
      }
      const at::Tensor a = got[i].second.to(at::kDouble);
      const at::Tensor b = want[i].second.to(at::kDouble);
      const double scale = std::max(b.abs().max().item<double>(), 1e-30);
      EXPECT_LE((a - b).abs().max().item<double>() / scale, relative) << where;
    }
  }
}

TEST(ClipGradNorm, TheGlobalNormIsTorchsClipGradNormOfTheStepsGradients) {
  const TempDir dir("clip-norm");
  const std::string plan = WritePlan(dir, "1f1b", 2, 1);
  const std::vector<Metric> metrics = Train(dir, plan, "norm",
                                            {"--transport", "inproc", "--clip-grad-norm", "0.001",
                                             "--dump-grads", dir.path() + "/grads"});
  ASSERT_EQ(metrics.size(), 8u);  // 4 steps x 2 ranks
  // torch's own clip_grad_norm_ over both stages' dumped gradients of the first step.
  std::vector<at::Tensor> grads;
  for (int stage = 0; stage < 2; ++stage) {
    const StatusOr<std::string> bytes = ReadFile(GradientDumpPath(dir.path() + "/grads", stage));
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    const StatusOr<c10::impl::GenericDict> dump = DecodeStageDump(*bytes);
    ASSERT_TRUE(dump.ok()) << dump.status().message();
    for (const auto& g : dump->at("grads").toGenericDict()) {
      at::Tensor p = at::zeros_like(g.value().toTensor());
      p.mutable_grad() = g.value().toTensor();
      grads.push_back(p);
    }
  }
  const double torch_norm = torch::nn::utils::clip_grad_norm_(grads, 1e9);
  for (const Metric& m : metrics) {
    if (m.step != 1) continue;
    ASSERT_TRUE(m.norm.has_value());
    ExpectNear(*m.norm, torch_norm, 1e-5, "rank " + std::to_string(m.rank) + "'s global norm");
    EXPECT_TRUE(m.clipped) << "a threshold of 0.001 clips every step";
  }
  for (const Metric& m : metrics) EXPECT_TRUE(m.clipped) << "step " << m.step;
}

TEST(ClipGradNorm, EveryStrategyClipsTheSameStepsAndTrainsTheSame) {
  const TempDir dir("clip-strategies");
  // Four stages each: 1f1b and zb-h1 on 4 ranks, zbv on 2 ranks of 2 stages (over Gloo), and
  // dualpipe's two copies of the four on 4 ranks (Gloo): the norm counts one copy.
  const std::vector<Metric> reference =
      LossLines(Train(dir, WritePlan(dir, "1f1b", 4, 1), "1f1b",
                      {"--transport", "inproc", "--clip-grad-norm", "0.2"}));
  ASSERT_EQ(reference.size(), 4u);
  int clipped = 0;
  for (const Metric& m : reference) clipped += m.clipped ? 1 : 0;
  ASSERT_GT(clipped, 0) << "no step clipped at 0.2: the case proves nothing";
  ASSERT_LT(clipped, 4) << "every step clipped at 0.2: the case proves less";
  struct Case {
    std::string strategy;
    int ranks;
    int stages_per_rank;
    std::string transport;
  };
  for (const Case& c :
       {Case{"zb-h1", 4, 1, "inproc"}, Case{"zbv", 2, 2, "gloo"}, Case{"dualpipe", 4, 2, "gloo"}}) {
    const std::vector<Metric> got =
        LossLines(Train(dir, WritePlan(dir, c.strategy, c.ranks, c.stages_per_rank), c.strategy,
                        {"--transport", c.transport, "--clip-grad-norm", "0.2"}));
    ASSERT_EQ(got.size(), reference.size()) << c.strategy;
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string where = c.strategy + ", step " + std::to_string(i + 1);
      EXPECT_EQ(got[i].clipped, reference[i].clipped) << where;
      ASSERT_TRUE(got[i].loss && reference[i].loss && got[i].norm && reference[i].norm) << where;
      ExpectNear(*got[i].loss, *reference[i].loss, 1e-5, where + ", loss");
      ExpectNear(*got[i].norm, *reference[i].norm, 1e-5, where + ", global norm");
    }
  }
}

// Stage 1's gradients are NaN in step 2: every rank skips step 2, and the run goes on from
// step 1's parameters and AdamW state: its steps 3 and 4 are the clean run's steps 2 and 3.
TEST(ClipGradNorm, ANonFiniteStepIsSkippedOnEveryRankAndLeavesNoTrace) {
  const TempDir dir("nonfinite");
  struct Case {
    std::string strategy;
    int ranks;
    int stages_per_rank;
  };
  for (const Case& c : {Case{"1f1b", 4, 1}, Case{"zbv", 2, 2}}) {
    const std::string plan = WritePlan(dir, c.strategy, c.ranks, c.stages_per_rank);
    const std::vector<Metric> clean = LossLines(Train(
        dir, plan, c.strategy + "-clean", {"--transport", "inproc", "--clip-grad-norm", "100"}));
    const std::vector<Metric> all =
        Train(dir, plan, c.strategy + "-nan",
              {"--transport", "inproc", "--clip-grad-norm", "100", "--inject-nonfinite", "2:1"});
    ASSERT_EQ(all.size(), size_t(4 * c.ranks)) << c.strategy;
    for (const Metric& m : all) {
      EXPECT_EQ(m.skipped, m.step == 2) << c.strategy << ", rank " << m.rank << ", step " << m.step;
      EXPECT_EQ(m.norm.has_value(), m.step != 2) << "a NaN norm is written as null";
    }
    const std::vector<Metric> skipped = LossLines(all);
    ASSERT_EQ(clean.size(), 4u);
    ASSERT_EQ(skipped.size(), 4u);
    ASSERT_TRUE(clean[1].loss && clean[2].loss && skipped[2].loss && skipped[3].loss);
    EXPECT_EQ(*skipped[2].loss, *clean[1].loss) << c.strategy << ": step 3 after a skipped step 2";
    EXPECT_EQ(*skipped[3].loss, *clean[2].loss) << c.strategy << ": step 4 after a skipped step 2";
    EXPECT_NE(*skipped[3].loss, *skipped[2].loss) << c.strategy << ": training went on";
  }
}

// The acceptance of post-validation at run time: zbv (2 ranks x 2 stages), zb-h1 and zb-h2 (4
// ranks), each rank a process over Gloo, with PV end every step with the parameters and AdamW state
// of the synchronous 1f1b run, clip in the same steps with the same global norm, and the steps
// whose speculative update had to be redone replayed forwards; also at a threshold every step
// clips.
TEST(PostValidation, SpeculativeStepsEndAsTheSynchronousReferenceDoes) {
  const TempDir dir("pv-equal");
  for (const char* threshold : {"0.2", "0.001"}) {
    const std::string ref_dir = dir.path() + "/ref-" + threshold;
    const std::vector<Metric> reference = LossLines(
        Train(dir, WritePlan(dir, "1f1b", 4, 1), std::string("1f1b-") + threshold,
              {"--transport", "inproc", "--clip-grad-norm", threshold, "--dump-params", ref_dir}));
    ASSERT_EQ(reference.size(), 4u);
    int clipped = 0;
    for (const Metric& m : reference) clipped += m.clipped ? 1 : 0;
    if (std::string(threshold) == "0.2") {
      ASSERT_GT(clipped, 0) << "no step clipped at 0.2: the case proves nothing";
      ASSERT_LT(clipped, 4) << "every step clipped at 0.2: the case proves less";
    } else {
      ASSERT_EQ(clipped, 4) << "0.001 clips every step";
    }
    struct Case {
      std::string strategy;
      int ranks;
      int stages_per_rank;
      std::string transport;
      bool step_barrier = true;  // false: steps follow each other without a barrier
    };
    std::vector<Case> cases = {
        {"zbv", 2, 2, "gloo"}, {"zbv", 2, 2, "inproc", false}, {"zbv", 2, 2, "gloo", false}};
    if (std::string(threshold) == "0.2") {
      cases.push_back({"zb-h1", 4, 1, "gloo"});
      cases.push_back({"zb-h2", 4, 1, "gloo"});
      cases.push_back({"zb-h1", 4, 1, "inproc", false});
    }
    for (const Case& c : cases) {
      const std::string name =
          c.strategy + "-pv-" + threshold + (c.step_barrier ? "" : "-no-step-barrier");
      const std::string got_dir = dir.path() + "/" + name;
      std::vector<std::string> flags = {"--transport", c.transport,     "--clip-grad-norm",
                                        threshold,     "--dump-params", got_dir};
      if (!c.step_barrier) flags.emplace_back("--no-step-barrier");
      const std::vector<Metric> all =
          Train(dir, WritePlan(dir, c.strategy, c.ranks, c.stages_per_rank, true), name, flags);
      const std::vector<Metric> got = LossLines(all);
      ASSERT_EQ(got.size(), reference.size()) << name;
      for (size_t i = 0; i < got.size(); ++i) {
        const std::string where = name + ", step " + std::to_string(i + 1);
        EXPECT_EQ(got[i].clipped, reference[i].clipped) << where;
        ASSERT_TRUE(got[i].norm && reference[i].norm) << where;
        ExpectNear(*got[i].norm, *reference[i].norm, 1e-5, where + ", global norm");
        ExpectSameDump(got_dir, ref_dir, int(i) + 1, int(i) + 1, 4, 1e-4, where);
      }
      // A clipped step but the last (which ends synchronously) was redone at the next PV,
      // whose forwards before it ran again; one that did not clip was kept.
      for (int step = 1; step <= 3; ++step) {
        int replayed = 0;
        for (const Metric& m : all) replayed += m.step == step ? m.replayed_forwards : 0;
        EXPECT_EQ(replayed > 0, reference[step - 1].clipped) << name << ", step " << step;
      }
    }
  }
}

// A NaN in stage 1's gradients at step 2 under zbv with PV: rank 0 (stages 0 and 3, whose own
// state was finite) updated speculatively and rolls back; every rank reports step 2 skipped;
// the parameters and AdamW state after step 2 are those after step 1, bit for bit; steps 3
// and 4 are the synchronous run's that skips step 2.
TEST(PostValidation, ANonFiniteStepIsRolledBackBitForBit) {
  const TempDir dir("pv-nan");
  const std::vector<std::string> flags = {"--clip-grad-norm", "100", "--inject-nonfinite", "2:1"};
  const std::string ref_dir = dir.path() + "/ref";
  std::vector<std::string> ref_flags = {"--transport", "inproc", "--dump-params", ref_dir};
  ref_flags.insert(ref_flags.end(), flags.begin(), flags.end());
  Train(dir, WritePlan(dir, "1f1b", 4, 1), "ref", ref_flags);
  const std::string got_dir = dir.path() + "/zbv";
  std::vector<std::string> got_flags = {"--transport", "inproc", "--dump-params", got_dir};
  got_flags.insert(got_flags.end(), flags.begin(), flags.end());
  const std::vector<Metric> all = Train(dir, WritePlan(dir, "zbv", 2, 2, true), "zbv", got_flags);
  ASSERT_EQ(all.size(), 8u);
  int replayed = 0;
  for (const Metric& m : all) {
    const std::string where = "rank " + std::to_string(m.rank) + ", step " + std::to_string(m.step);
    EXPECT_EQ(m.skipped, m.step == 2) << where;
    EXPECT_EQ(m.rolled_back, m.step == 2 && m.rank == 0) << where;
    if (m.step == 2) replayed += m.replayed_forwards;
  }
  EXPECT_GT(replayed, 0) << "the forwards run on the speculative weights were not replayed";
  ExpectSameDump(got_dir, got_dir, 2, 1, 4, 0, "zbv, after step 2 vs after step 1");
  for (int step = 2; step <= 4; ++step) {
    ExpectSameDump(got_dir, ref_dir, step, step, 4, 1e-4,
                   "zbv vs 1f1b, step " + std::to_string(step));
  }
}

TEST(ClipGradNorm, BadValuesAreRefusedNamingTheFlagAndTheRange) {
  const TempDir dir("clip-bad");
  const std::string plan = WritePlan(dir, "1f1b", 2, 1);
  struct Case {
    std::vector<std::string> flags;
    std::string expected;
  };
  std::vector<Case> cases = {
      {{"--clip-grad-norm", "0"}, "--clip-grad-norm: '0' is not a finite number greater than 0"},
      {{"--clip-grad-norm", "-1"}, "--clip-grad-norm: '-1' is not a finite"},
      {{"--clip-grad-norm", "nan"}, "--clip-grad-norm: 'nan' is not a finite"},
      {{"--clip-grad-norm", "inf"}, "--clip-grad-norm: 'inf' is not a finite"},
      {{"--clip-grad-norm", "x"}, "--clip-grad-norm: 'x' is not a finite"},
      {{"--inject-nonfinite", "2"}, "--inject-nonfinite: '2' is not STEP:STAGE"},
      {{"--inject-nonfinite", "0:1"}, "--inject-nonfinite: '0:1' is not STEP:STAGE (STEP from 1"},
      {{"--inject-nonfinite", "2:1x"}, "--inject-nonfinite: '2:1x' is not STEP:STAGE"},
      {{"--inject-nonfinite", "5:0"},
       "--inject-nonfinite: step 5, stage 0 is outside the run (steps 1 to 4, stages 0 to 1)"},
      {{"--inject-nonfinite", "1:2"},
       "--inject-nonfinite: step 1, stage 2 is outside the run (steps 1 to 4, stages 0 to 1)"},
  };
  // A directory under a regular file can never be made: refused before any step runs.
  const std::string file = dir.path() + "/a-file";
  std::ofstream(file) << "x";
  for (const char* flag : {"--dump-grads", "--dump-params", "--metrics"}) {
    const std::string target = file + (std::string(flag) == "--metrics" ? "/sub/m.jsonl" : "/sub");
    cases.push_back({{flag, target}, std::string(flag) + ": cannot create '" + file + "/sub'"});
  }
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", plan, "--transport", "inproc", "--steps", "3"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const CommandResult run = RunTorchTool(args);
    EXPECT_NE(run.exit_code, 0) << c.flags.back();
    EXPECT_NE(run.output.find(c.expected), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("median step"), std::string::npos) << "a step ran: " << run.output;
  }
}

}  // namespace
}  // namespace pipeplan::torch_ext
