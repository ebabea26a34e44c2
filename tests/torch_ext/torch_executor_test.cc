// The pieces under the torch executor: the I/W split gives B's gradients (and a profile sets
// I + W beside B alone), and a run whose peer dies mid-step ends every rank with an error
// within the timeout.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "matmul_flops.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/rank_processes.h"
#include "pipeplan/torch_ext/backward_reference.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/transformer_stage.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

using testing::MatmulFlops;

struct Grads {
  std::vector<at::Tensor> params;
  at::Tensor input;
};

// One stage, one microbatch, a fixed output gradient: backward as one B (phase "B"), or as I
// then W (phases "I", "W"), after the forward (phase "F"); `flops` counts each phase's matrix
// products when given.
Grads Backward(bool split, MatmulFlops* flops = nullptr) {
  ModelConfig config;
  config.hidden = 32;
  config.sequence = 8;
  const TransformerStage stage_const(config, 3, at::kCPU);
  TransformerStage stage = stage_const;
  for (const at::Tensor& p : stage.parameters()) p.mutable_grad().reset();
  WeightGradStash stash;
  const auto phase = [&](const char* name) {
    if (flops != nullptr) flops->Phase(name);
  };
  const at::Tensor x = MicrobatchInput(config, 0, at::kCPU).requires_grad_(true);
  phase("F");
  const at::Tensor y = stage.Forward(x, LinearMode::kDeferred, &stash);
  phase("");
  const at::Tensor grad = MicrobatchTarget(config, 0, at::kCPU);
  if (split) {
    std::vector<at::Tensor> inputs = stage.InputPhaseParameters();
    inputs.push_back(x);
    phase("I");
    torch::autograd::backward({y}, {grad}, false, false, inputs);
    phase("");
    EXPECT_FALSE(stash.empty());
    for (size_t i = 0; i < stage.parameters().size(); ++i) {
      const std::string& name = stage.parameter_names()[i];
      const bool is_norm = name.find(".ln") != std::string::npos;
      EXPECT_EQ(stage.parameters()[i].grad().defined(), is_norm) << name << " after I";
    }
    phase("W");
    stage.ApplyWeightGrads(stash);
    phase("");
    EXPECT_TRUE(stash.empty());
  } else {
    phase("B");
    torch::autograd::backward({y}, {grad});
    phase("");
    EXPECT_TRUE(stash.empty());
  }
  Grads out;
  for (const at::Tensor& p : stage.parameters()) out.params.push_back(p.grad().clone());
  out.input = x.grad().clone();
  return out;
}

TEST(WeightGradSplit, IThenWGivesTheGradientsOfB) {
  const Grads b = Backward(false);
  const Grads iw = Backward(true);
  ASSERT_EQ(b.params.size(), iw.params.size());
  EXPECT_TRUE(at::allclose(iw.input, b.input, 1e-6, 1e-8));
  for (size_t i = 0; i < b.params.size(); ++i) {
    ASSERT_TRUE(iw.params[i].defined()) << i;
    EXPECT_TRUE(at::allclose(iw.params[i], b.params[i], 1e-6, 1e-8)) << "parameter " << i;
  }
}

// The split does no extra work: I and W together run exactly B's matrix products. W is the
// four linears' weight GEMMs of each of the stage's two blocks (hidden 32, 16 tokens).
TEST(WeightGradSplit, IPlusWRunsExactlyTheMatmulFlopsOfB) {
  MatmulFlops flops;
  Backward(false, &flops);
  Backward(true, &flops);
  // Per block, each weight GEMM is grad^T [out, tokens] x input [tokens, in]: 2 tokens out in
  // FLOPs over qkv (3h x h), proj (h x h), fc1 (4h x h) and fc2 (h x 4h), 12 h^2 in all.
  const ModelConfig config;  // Backward's sizes: 2 blocks, 2 samples of 8 tokens, h = 32
  const int64_t tokens = int64_t{config.microbatch_size} * 8;
  const int64_t h = 32;
  EXPECT_EQ(flops["W"], config.layers_per_stage * 2 * tokens * 12 * h * h);
  EXPECT_GT(flops["I"], 0);
  EXPECT_EQ(flops["I"] + flops["W"], flops["B"])
      << "I " << flops["I"] << " + W " << flops["W"] << " vs B " << flops["B"];
  // And a backward is two forwards' worth (F counted the forwards of both runs).
  EXPECT_EQ(flops["B"], flops["F"]);
  EXPECT_EQ(flops[""], 0) << "matrix products outside F, B, I and W";
}

// Stages built for the same (seed, stage) are the same model wherever they are built.
TEST(TransformerStage, IsDeterministicPerSeedAndStage) {
  ModelConfig config;
  const TransformerStage a(config, 2, at::kCPU), b(config, 2, at::kCPU), c(config, 3, at::kCPU);
  ASSERT_EQ(a.parameters().size(), b.parameters().size());
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    EXPECT_TRUE(at::equal(a.parameters()[i], b.parameters()[i]));
  }
  EXPECT_FALSE(at::equal(a.parameters()[2], c.parameters()[2]));  // a qkv weight
}

// A rank that dies between steps never reaches the next step's barrier: the ranks waiting
// there name it rather than only time out. Three ranks over Gloo, threads of this process.
TEST(PeerFailure, AStepBarrierNamesTheRankThatNeverCame) {
  constexpr int kRanks = 3;
  const int port = runtime::FreeLocalPort();
  ASSERT_NE(port, 0);
  std::vector<StatusOr<GlooConnection>> connections;
  for (int r = 0; r < kRanks; ++r) connections.emplace_back(Internal("not connected"));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        connections[r] = ConnectGloo(
            {.port = port, .rank = r, .world_size = kRanks, .timeout = std::chrono::seconds(20)});
      });
    }
  }
  for (const auto& connection : connections) {
    ASSERT_TRUE(connection.ok()) << connection.status().message();
  }
  const auto meet = [&](const std::vector<int>& ranks, const std::string& name,
                        std::chrono::milliseconds timeout) {
    std::vector<Status> results(kRanks, Status::Ok());
    std::vector<std::jthread> threads;
    for (const int r : ranks) {
      threads.emplace_back(
          [&, r] { results[r] = connections[r]->coordinator->Barrier(name, timeout); });
    }
    threads.clear();  // joins
    return results;
  };

  const std::vector<Status> without_one = meet({0, 2}, "step-2", std::chrono::milliseconds(300));
  for (const int r : {0, 2}) {
    EXPECT_EQ(without_one[r].code(), StatusCode::kDeadlineExceeded) << "rank " << r;
    EXPECT_EQ(without_one[r].message(),
              "barrier 'step-2' failed: rank 1 did not reach it within 0.3 s (exited or stuck; "
              "every other rank arrived)")
        << "rank " << r;
  }
  for (const Status& status : meet({0, 1, 2}, "step-3", std::chrono::seconds(20))) {
    EXPECT_TRUE(status.ok()) << status.message();
  }
}

// Rank 1 exits mid-step (its process dies); rank 0, waiting on it, must fail within the
// timeout, and the launcher reports both.
TEST(PeerFailure, ADyingPeerEndsTheRunWithAnError) {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 4;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok());
  size_t compute = 0;
  int seen = 0;
  for (size_t i = 0; i < plan->programs[1].actions.size(); ++i) {
    if (IsCompute(plan->programs[1].actions[i].kind) && ++seen == 3) compute = i;
  }
  const testing::TempDir dir("peer");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(*plan, ProtoFormat::kBinary);
  constexpr int kTimeout = 10;
  const testing::CommandResult run = testing::RunTorchTool(
      {"run", "--plan", path, "--local-ranks", "2", "--steps", "2", "--timeout",
       std::to_string(kTimeout), "--inject-fault", "crash@1:" + std::to_string(compute) + ":1"},
      120);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("rank 1 exited with code " + std::to_string(runtime::kCrashExitCode)),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("pipeplan-torch run: error: rank 0"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("killing it"), std::string::npos) << run.output;
  // Writing to the dead peer's socket is an error to report, never SIGPIPE to die of.
  EXPECT_EQ(run.output.find("killed by signal"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, kTimeout + 20) << run.output;
}

// The first action of `kind` in `rank`'s program.
size_t FirstOf(const Plan& plan, int rank, ActionKind kind) {
  const auto& actions = plan.programs[rank].actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].kind == kind) return i;
  }
  ADD_FAILURE() << "rank " << rank << " has no " << KindToken(kind);
  return 0;
}

// Runs a 2-rank 1f1b plan over Gloo processes with `fault` injected; --timeout 5.
testing::CommandResult RunWithFault(const std::string& name, const Plan& plan,
                                    const std::string& fault,
                                    const std::vector<std::string>& flags = {}) {
  const testing::TempDir dir(name);
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(plan, ProtoFormat::kBinary);
  std::vector<std::string> args = {"run", "--plan",    path, "--local-ranks",  "2",  "--steps",
                                   "2",   "--timeout", "5",  "--inject-fault", fault};
  args.insert(args.end(), flags.begin(), flags.end());
  return testing::RunTorchTool(args, 120);
}

Plan TwoRankPlan() {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 4;
  StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return *plan;
}

// As a newcomer runs it: the plan as the first argument, no torchrun and no --local-ranks. The
// plan's ranks run as local processes, and one line says so.
TEST(TorchTool, OutsideTorchrunThePlansRanksRunAsLocalProcesses) {
  const testing::TempDir dir("newcomer");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(TwoRankPlan(), ProtoFormat::kBinary);
  const testing::CommandResult run =
      testing::RunTorchTool({"run", path, "--steps", "1", "--warmup", "0"}, 120);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("pipeplan-torch run: not under torchrun (RANK is not set): running "
                            "the plan's 2 ranks as processes of this machine (--local-ranks 2)"),
            std::string::npos)
      << run.output;
}

// A failing rank's error names it once ("rank 1, action 2 (1B0): ..."), a rank that stops
// because of it says which rank it is.
TEST(TorchTool, AChildsErrorNamesItsRankOnce) {
  const testing::TempDir dir("once");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(TwoRankPlan(), ProtoFormat::kBinary);
  const testing::CommandResult run = testing::RunTorchTool(
      {"run", path, "--steps", "1", "--warmup", "0", "--inject-fault", "fail@1:2"}, 120);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("pipeplan-torch run: error: rank 1, action 2 (1B0): injected failure"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("rank 1: rank 1"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("pipeplan-torch run: error: rank 0: rank 1, action 2 (1B0)"),
            std::string::npos)
      << run.output;
}

// B alone (the profile's split check) runs the stage's forward and backward and leaves the
// parameters' gradients as they were, defined or not.
TEST(BackwardReference, LeavesTheParametersGradientsAsTheyWere) {
  ModelConfig config;
  config.hidden = 32;
  config.sequence = 8;
  const TransformerStage stage(config, 1, at::kCPU);
  const std::vector<at::Tensor>& parameters = stage.parameters();
  ASSERT_GE(parameters.size(), 2u);
  parameters[0].mutable_grad() = at::full_like(parameters[0], 3.0);
  for (const bool last : {false, true}) {
    const StatusOr<double> seconds = MedianBackwardSeconds(
        stage, config, at::kCPU, {.last_stage = last, .microbatches = 4, .repetitions = 3});
    ASSERT_TRUE(seconds.ok()) << seconds.status().message();
    EXPECT_GT(*seconds, 0.0);
    EXPECT_TRUE(at::equal(parameters[0].grad(), at::full_like(parameters[0], 3.0)));
    EXPECT_FALSE(parameters[1].grad().defined());
  }
  EXPECT_FALSE(MedianBackwardSeconds(stage, config, at::kCPU, {.repetitions = 0}).ok());
}

// The profile of a split plan sets each stage's measured I + W beside B timed alone; that of a
// plan without I and W prints no such line. Over Gloo processes, so the figures of rank 1's
// stage reach rank 0 through the store.
TEST(TorchTool, AProfileOfASplitPlanSetsIPlusWBesideBAlone) {
  const testing::TempDir dir("split-check");
  PlanRequest request;
  request.strategy = "zb-h1";
  request.topology.ranks = 2;
  request.topology.microbatches = 4;
  const StatusOr<Plan> split = BuildPlan(request);
  ASSERT_TRUE(split.ok()) << split.status().message();
  for (const auto& [name, plan] : {std::pair<std::string, Plan>{"zb-h1", *split},
                                   std::pair<std::string, Plan>{"1f1b", TwoRankPlan()}}) {
    const std::string path = dir.path() + "/" + name + ".pb";
    const std::string profile_path = dir.path() + "/" + name + "-profile.json";
    std::ofstream(path, std::ios::binary) << *SerializePlan(plan, ProtoFormat::kBinary);
    const testing::CommandResult run = testing::RunTorchTool(
        {"profile", path, "--steps", "2", "--warmup", "1", "-o", profile_path}, 120);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    if (name == "1f1b") {
      EXPECT_EQ(run.output.find("split:"), std::string::npos) << run.output;
      continue;
    }
    std::ifstream in(profile_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const StatusOr<Profile> profile = ParseProfile(text, ProtoFormat::kJson);
    ASSERT_TRUE(profile.ok()) << profile.status().message();
    EXPECT_NE(run.output.find("split: I + W of the steps against B timed alone after them (median "
                              "of 5 microbatches), by stage:"),
              std::string::npos)
        << run.output;
    for (int stage = 0; stage < 2; ++stage) {
      const double i = profile->stages[stage].backward_input.median * 1e3;
      const double w = profile->stages[stage].backward_weight.median * 1e3;
      char expected[120];
      std::snprintf(expected, sizeof expected, "  stage %d: I %.3f ms + W %.3f ms = %.3f ms, B ",
                    stage, i, w, i + w);
      EXPECT_NE(run.output.find(expected), std::string::npos) << expected << "\n" << run.output;
    }
  }
}

// Memory is counted unless --no-memory: then no rank reports bytes, and the measured timeline
// carries times alone. Over Gloo processes, so the flag must reach the ranks it spawns.
TEST(TorchTool, NoMemoryCountsNoBytes) {
  const testing::TempDir dir("no-memory");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(TwoRankPlan(), ProtoFormat::kBinary);
  for (const bool counted : {true, false}) {
    SCOPED_TRACE(counted ? "counted" : "--no-memory");
    const std::string timeline_path = dir.path() + (counted ? "/counted.pb" : "/plain.pb");
    std::vector<std::string> args = {"run",      path, "--steps",    "1",
                                     "--warmup", "1",  "--timeline", timeline_path};
    if (!counted) args.emplace_back("--no-memory");
    const testing::CommandResult run = testing::RunTorchTool(args, 120);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(run.output.find("memory: rank 1 peak") != std::string::npos, counted) << run.output;
    std::ifstream in(timeline_path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const StatusOr<TimelineFile> file = ParseTimelineFile(bytes, ProtoFormat::kBinary);
    ASSERT_TRUE(file.ok()) << file.status().message();
    ASSERT_EQ(file->timeline.ranks.size(), 2u);
    for (const RankTimeline& rank : file->timeline.ranks) {
      EXPECT_EQ(rank.memory_unit == MemoryUnit::kBytes, counted) << "rank " << rank.rank.value;
      EXPECT_EQ(rank.action_memory.empty(), !counted) << "rank " << rank.rank.value;
      EXPECT_EQ(rank.peak_memory > 0, counted) << "rank " << rank.rank.value;
    }
  }
}

TEST(TorchTool, ThePlanIsGivenOnce) {
  const testing::CommandResult twice = testing::RunTorchTool({"run", "a.pb", "--plan", "b.pb"}, 60);
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("unexpected argument 'a.pb' (the plan is given once: PLAN or "
                              "--plan PLAN)"),
            std::string::npos)
      << twice.output;
  const testing::CommandResult none = testing::RunTorchTool({"run", "--steps", "1"}, 60);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("missing the plan (pipeplan-torch run PLAN, or --plan PLAN)"),
            std::string::npos)
      << none.output;
}

// A profile or timeline that could not be written is named before the ranks run, not after
// the run's work is lost.
TEST(TorchTool, ABadOutputPathIsNamedBeforeTheRun) {
  const testing::TempDir dir("bad-output");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(TwoRankPlan(), ProtoFormat::kBinary);
  const testing::CommandResult run = testing::RunTorchTool(
      {"profile", path, "--steps", "2", "-o", dir.path(), "--transport", "inproc"}, 60);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("cannot write '" + dir.path() + "': is a directory"), std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("steps:"), std::string::npos) << "ran before refusing:\n" << run.output;
}

// --steps-svg: the first three measured steps on the run's clock, in-process with or without
// the barrier and in processes without it; processes with the barrier time each step from
// its own barrier, so their steps are drawn back to back and the title says so.
TEST(TorchTool, DrawsTheFirstMeasuredStepsOneAfterAnother) {
  const testing::TempDir dir("steps-svg");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(TwoRankPlan(), ProtoFormat::kBinary);
  struct Case {
    std::vector<std::string> flags;
    std::string title;
    bool back_to_back;
  };
  const std::vector<Case> cases = {
      {{"--transport", "inproc"}, "each opened by the step barrier", false},
      {{"--no-step-barrier"}, "no step barrier", false},
      {{}, "each opened by the step barrier", true},
  };
  for (const Case& c : cases) {
    const std::string svg_path = dir.path() + "/steps.svg";
    std::vector<std::string> args = {"run", path, "--steps", "3", "--steps-svg", svg_path};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const testing::CommandResult run = testing::RunTorchTool(args, 120);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream in(svg_path);
    const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << c.title;
    EXPECT_NE(svg.find("measured steps 2 to 4, " + c.title), std::string::npos) << svg;
    EXPECT_EQ(svg.find("drawn back to back") != std::string::npos, c.back_to_back) << c.title;
    EXPECT_NE(svg.find("<title>0F11 "), std::string::npos) << "the third step's last microbatch";
  }
}

// Rank 0's first activation of the second step arrives with half its bytes (8192 -> 4096 for
// the default model): both ranks fail, the error names both sizes, nothing hangs.
TEST(PeerFailure, AMalformedMessageEndsTheRunNamingBothSizes) {
  const Plan plan = TwoRankPlan();
  const size_t send = FirstOf(plan, 0, ActionKind::kSendForward);
  const testing::CommandResult run =
      RunWithFault("malformed", plan, "truncate@0:" + std::to_string(send) + ":1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("4096"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("8192"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("killing it"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 5 + 20) << run.output;
}

// Rank 1 hangs in a compute: its watchdog fails it after --timeout, and rank 0, waiting on
// it, stops too; the run ends with an error naming the stall.
TEST(PeerFailure, AStalledRankEndsTheRunAfterTheTimeout) {
  const Plan plan = TwoRankPlan();
  const size_t compute = FirstOf(plan, 1, ActionKind::kBackward);
  const testing::CommandResult run =
      RunWithFault("stalled", plan, "stall@1:" + std::to_string(compute) + ":1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("has been running for"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("killing it"), std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 5 + 20) << run.output;
}

// Without a barrier between steps nothing waits for a rank at a step's start: a rank that dies
// or hangs at its second step's first compute is still found by the ranks waiting on it
// (the transport's error, the watchdog), within the timeout.
TEST(PeerFailure, WithoutAStepBarrierADeadOrStalledRankStillEndsTheRun) {
  const Plan plan = TwoRankPlan();
  const size_t first = FirstOf(plan, 1, ActionKind::kForward);
  const testing::CommandResult died = RunWithFault(
      "died-free", plan, "crash@1:" + std::to_string(first) + ":1", {"--no-step-barrier"});
  EXPECT_EQ(died.exit_code, 1) << died.output;
  EXPECT_NE(died.output.find("rank 1 exited with code " + std::to_string(runtime::kCrashExitCode)),
            std::string::npos)
      << died.output;
  EXPECT_LT(died.seconds, 5 + 20) << died.output;
  const testing::CommandResult stalled = RunWithFault(
      "stalled-free", plan, "stall@1:" + std::to_string(first) + ":1", {"--no-step-barrier"});
  EXPECT_EQ(stalled.exit_code, 1) << stalled.output;
  EXPECT_NE(stalled.output.find("has been running for"), std::string::npos) << stalled.output;
  EXPECT_LT(stalled.seconds, 5 + 20) << stalled.output;
}

}  // namespace
}  // namespace pipeplan::torch_ext
