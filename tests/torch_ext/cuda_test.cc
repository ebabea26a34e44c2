// What needs a GPU: CUDA-event op timing, NCCL runs and ranks as threads on one GPU. On a machine
// without one (CI) the refusals are checked and the GPU tests skip, saying why;
// scripts/gpu_bundle.sh packs this binary for the GPU acceptance run (gpu_check.sh), where they
// run.
#include <ATen/ATen.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gradient_check.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/rank_processes.h"
#include "pipeplan/torch_ext/cuda_op_timer.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/memory_meter.h"
#include "pipeplan/torch_ext/nccl_transport.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "pipeplan/torch_ext/transformer_stage.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

int CudaDevices() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::string StrategyName(const ::testing::TestParamInfo<std::string>& param) {
  std::string name = param.param;
  for (char& c : name) {
    if (c == '-' || c == ':') c = '_';
  }
  return name;
}

// `strategy` at P = 2, M = 4 (V = 2 where it needs it).
Plan TwoRankPlan(const std::string& strategy) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = 2;
  request.topology.microbatches = 4;
  request.topology.stages_per_rank = strategy == "1f1b" || strategy == "zb-h1" ? 1 : 2;
  StatusOr<Plan> plan = BuildPlan(request);
  EXPECT_TRUE(plan.ok()) << strategy << ": " << plan.status().message();
  return plan.ok() ? std::move(*plan) : Plan{};
}

TEST(CudaEventTimer, WithoutAGpuItIsRefusedNamingWhy) {
  if (CudaDeviceAvailable().ok()) GTEST_SKIP() << "this machine has a CUDA device";
  const StatusOr<std::unique_ptr<runtime::OpTimer>> timer = MakeCudaEventTimer(0);
  ASSERT_FALSE(timer.ok());
  EXPECT_EQ(timer.status().message().find("no CUDA device"), 0u) << timer.status().message();
}

TEST(CudaEventTimer, ADeviceThatIsNotThereIsRefused) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  const StatusOr<std::unique_ptr<runtime::OpTimer>> timer = MakeCudaEventTimer(CudaDevices());
  ASSERT_FALSE(timer.ok());
  EXPECT_NE(timer.status().message().find("does not exist"), std::string::npos)
      << timer.status().message();
}

// A kernel runs long after its launch returned: the events time the kernel. A 4096^3 fp32
// product is about 1.4e11 FLOPs, milliseconds on any GPU; its launch takes microseconds.
TEST(CudaEventTimer, TimesTheKernelsNotTheirLaunch) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  StatusOr<std::unique_ptr<runtime::OpTimer>> made = MakeCudaEventTimer(0);
  ASSERT_TRUE(made.ok()) << made.status().message();
  runtime::OpTimer& timer = **made;
  EXPECT_EQ(timer.clock(), OpClock::kCudaEvents);
  const at::Tensor a = at::randn({4096, 4096}, at::TensorOptions().device("cuda:0"));
  at::Tensor c = at::empty_like(a);
  at::mm_out(c, a, a);  // cuBLAS's one-time set-up is not a launch
  ASSERT_TRUE(timer.BeginStep(2).ok());
  ASSERT_TRUE(timer.ComputeBegins(0).ok());
  const runtime::TimePoint launch = runtime::Clock::now();
  for (int i = 0; i < 4; ++i) at::mm_out(c, a, a);
  const double launch_seconds = runtime::SecondsBetween(launch, runtime::Clock::now());
  ASSERT_TRUE(timer.ComputeEnded(0).ok());
  ASSERT_TRUE(timer.ComputeBegins(1).ok());
  c.add_(1.0);
  ASSERT_TRUE(timer.ComputeEnded(1).ok());
  const StatusOr<std::vector<runtime::OpSpan>> spans = timer.Resolve();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  ASSERT_EQ(spans->size(), 2u);
  const double mm = runtime::SecondsBetween((*spans)[0].start, (*spans)[0].end);
  EXPECT_GT(mm, 5 * launch_seconds) << "kernel " << mm << " s, launch " << launch_seconds << " s";
  EXPECT_GE((*spans)[1].start, (*spans)[0].end);  // one stream: in order
  EXPECT_LE((*spans)[1].start, (*spans)[1].end);
}

TEST(CudaMemoryMeter, WithoutAGpuItIsRefusedNamingWhy) {
  if (CudaDevices() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  const StatusOr<std::unique_ptr<MemoryMeter>> meter = MakeMemoryMeter(at::Device("cuda:0"));
  ASSERT_FALSE(meter.ok());
  EXPECT_NE(meter.status().message().find("has 0 CUDA devices"), std::string::npos)
      << meter.status().message();
}

// Without the meter's refusal in front, the stages' CUDA tensors are what fails: torch throws,
// and Create must return that as an error rather than let it end the process.
TEST(TorchExecutorOnCuda, WithoutAGpuCreatingTheStagesIsAnErrorNotACrash) {
  if (CudaDevices() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  TorchExecutorOptions options;
  options.device = "cuda:0";
  options.count_memory = false;
  options.model.hidden = 64;
  options.model.sequence = 8;
  const StatusOr<std::unique_ptr<TorchExecutor>> executor =
      TorchExecutor::Create(TwoRankPlan("1f1b"), RankId(0), options);
  ASSERT_FALSE(executor.ok());
  EXPECT_NE(executor.status().message().find("rank 0 could not set up its stages on cuda:0"),
            std::string::npos)
      << executor.status().message();
}

TEST(CudaMemoryMeter, CountsTheCachingAllocatorsBytesNotWhatItReserves) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  StatusOr<std::unique_ptr<MemoryMeter>> meter = MakeMemoryMeter(at::Device("cuda:0"));
  ASSERT_TRUE(meter.ok()) << meter.status().message();
  const int64_t before = (*meter)->Allocated();
  (*meter)->ResetPeak();
  EXPECT_EQ((*meter)->Peak(), before);
  {
    const at::Tensor a = at::empty({1 << 18}, at::TensorOptions().device(at::kCUDA));  // 1 MiB
    const at::Tensor b = at::empty({1 << 16}, at::TensorOptions().device(at::kCUDA));
    EXPECT_EQ((*meter)->Allocated() - before, (1 << 20) + (1 << 18));
  }
  // Freed blocks stay reserved in the cache; allocated bytes go back.
  EXPECT_EQ((*meter)->Allocated(), before);
  EXPECT_EQ((*meter)->Peak() - before, (1 << 20) + (1 << 18));
}

TEST(CudaMemoryMeter, TheExecutorRecordsWhatEachActionKeptOnTheGpu) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  PlanRequest request;
  request.strategy = "gpipe";  // every F, then every B: the peak holds all M activations
  request.topology.ranks = 1;
  request.topology.microbatches = 4;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  TorchExecutorOptions options;
  options.device = "cuda:0";
  options.model.hidden = 256;
  options.model.sequence = 64;
  StatusOr<std::unique_ptr<TorchExecutor>> executor =
      TorchExecutor::Create(*plan, RankId(0), options);
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  const auto transports = runtime::MakeInProcTransports(1);
  runtime::OpExecutor* executors[] = {executor->get()};
  runtime::Transport* transport_ptrs[] = {transports[0].get()};
  runtime::LocalRunOptions run;
  run.steps = 1;
  run.warmup = 1;
  const StatusOr<std::vector<Timeline>> steps =
      runtime::RunLocal(*plan, executors, transport_ptrs, run);
  ASSERT_TRUE(steps.ok()) << steps.status().message();
  const RankTimeline& rank = steps->front().ranks[0];
  const RankProgram& program = plan->programs[0];
  ASSERT_EQ(rank.memory_unit, MemoryUnit::kBytes);
  ASSERT_EQ(rank.action_memory.size(), program.actions.size());
  std::vector<double> kept;
  std::vector<double> freed;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const ActionMemory& m = rank.action_memory[i];
    EXPECT_GE(m.peak, std::max(m.start, m.end)) << "action " << i;
    if (program.actions[i].kind == ActionKind::kForward) kept.push_back(m.end - m.start);
    if (program.actions[i].kind == ActionKind::kBackward) freed.push_back(m.start - m.end);
  }
  ASSERT_EQ(kept.size(), 4u);
  ASSERT_EQ(freed.size(), 4u);
  for (size_t mb = 0; mb < 4; ++mb) {
    EXPECT_GT(kept[mb], 0.0);
    EXPECT_EQ(kept[mb], kept[0]) << "microbatch " << mb;
    EXPECT_GT(freed[mb], 0.0) << "microbatch " << mb;
    EXPECT_LE(freed[mb], kept[mb]) << "microbatch " << mb;
  }
  // GPipe holds all four activations before the first B.
  EXPECT_GE(rank.peak_activation_memory, 4 * kept[0]);
  std::cout << "gpipe, 1 rank, M = 4 on cuda:0 (hidden 256, sequence 64): F keeps " << kept[0]
            << " B, B frees " << freed[0] << " B, step peak " << rank.peak_memory << " B, static "
            << rank.peak_memory - rank.peak_activation_memory << " B\n";
}

TEST(NcclTransport, WithoutAGpuTheRunIsRefusedNamingWhy) {
  if (CudaDeviceAvailable().ok()) GTEST_SKIP() << "this machine has a CUDA device";
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 2;
  request.topology.microbatches = 2;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok());
  const testing::TempDir dir("nccl-refused");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(*plan, ProtoFormat::kBinary);
  const testing::CommandResult run = testing::RunTorchTool(
      {"run", "--plan", path, "--local-ranks", "2", "--transport", "nccl"}, 60);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("--transport nccl: no CUDA device"), std::string::npos) << run.output;
}

// How the NCCL transport's Abort reaches every rank (CPU: the store is the Gloo rendezvous's):
// the first reason published wins, and the run's other watchers (here a Gloo transport on the
// same store) stop with it.
TEST(AbortThroughTheStore, TheFirstReasonWinsAndEveryWatcherStopsWithIt) {
  Rendezvous rendezvous;
  rendezvous.port = runtime::FreeLocalPort();
  ASSERT_NE(rendezvous.port, 0);
  StatusOr<GlooConnection> gloo = ConnectGloo(rendezvous);
  ASSERT_TRUE(gloo.ok()) << gloo.status().message();
  runtime::Coordinator& coordinator = *gloo->coordinator;
  EXPECT_FALSE(coordinator.PublishedAbort().has_value());
  const std::string first = "rank 1, action 3 (1F0): the executor threw: boom";
  EXPECT_EQ(coordinator.PublishAbort(Internal(first)).message(), first);
  EXPECT_EQ(coordinator.PublishAbort(Internal("a later reason")).message(), first);
  const std::optional<Status> seen = coordinator.PublishedAbort();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->code(), StatusCode::kAborted);
  EXPECT_EQ(seen->message(), first);
  StatusOr<std::vector<std::unique_ptr<runtime::PendingOp>>> posted = gloo->transport->Post({});
  for (int i = 0; i < 250 && posted.ok(); ++i) {  // its watcher polls every 20 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    posted = gloo->transport->Post({});
  }
  ASSERT_FALSE(posted.ok());
  EXPECT_EQ(posted.status().message(), first);
}

// One GPU cannot host two NCCL ranks, so with one GPU a rank sends to itself.
TEST(NcclTransport, OneRankSendsToItselfOnTheGpu) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  Rendezvous rendezvous;
  rendezvous.port = runtime::FreeLocalPort();
  ASSERT_NE(rendezvous.port, 0);
  StatusOr<GlooConnection> gloo = ConnectGloo(rendezvous);
  ASSERT_TRUE(gloo.ok()) << gloo.status().message();
  StatusOr<NcclConnection> nccl =
      ConnectNccl(*gloo->coordinator, 0, 1, 0, std::chrono::milliseconds(30000));
  ASSERT_TRUE(nccl.ok()) << nccl.status().message();
  const at::Tensor sent = at::arange(1024, at::TensorOptions().dtype(at::kFloat).device("cuda:0"));
  const at::Tensor received = at::zeros_like(sent);
  const auto bytes = [](const at::Tensor& t) {
    return std::span<std::byte>(static_cast<std::byte*>(t.data_ptr()), t.nbytes());
  };
  const std::vector<runtime::P2POp> ops = {{runtime::P2PKind::kSend, RankId(0), bytes(sent)},
                                           {runtime::P2PKind::kRecv, RankId(0), bytes(received)}};
  auto pending = nccl->transport->Post(ops);
  ASSERT_TRUE(pending.ok()) << pending.status().message();
  for (auto& op : *pending) {
    const Status waited = op->Wait(runtime::Clock::now() + std::chrono::seconds(30));
    ASSERT_TRUE(waited.ok()) << waited.message();
  }
  EXPECT_TRUE(at::equal(sent, received));
}

// One step of `strategy` at P = 2 on the GPU (pipeplan-torch with `device_flags`) gives the
// loss and gradients of the same plan run on CPU threads. GPU and CPU kernels sum in different
// orders: rtol 1e-4 rather than the CPU tests' 1e-5.
void ExpectTheCpuRunsGradients(const std::string& strategy,
                               const std::vector<std::string>& device_flags,
                               const std::string& name) {
  const Plan plan = TwoRankPlan(strategy);
  ModelConfig config;
  config.layers_per_stage = 1;
  config.hidden = 64;
  config.seed = 7;
  TorchExecutorOptions options;
  options.model = config;
  const testing::StepResult cpu = testing::RunInProcess(plan, options);
  std::vector<std::string> flags = testing::ModelFlags(config);
  flags.insert(flags.end(), device_flags.begin(), device_flags.end());
  const testing::StepResult gpu = testing::RunOverGloo(plan, flags, name + strategy);
  testing::ExpectMatches(gpu, cpu, 1e-4);
}

// One step over NCCL, one GPU per rank.
class NcclGradients : public ::testing::TestWithParam<std::string> {};

TEST_P(NcclGradients, MatchTheCpuRun) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  if (CudaDevices() < 2) GTEST_SKIP() << "needs 2 GPUs (one per rank); this machine has 1";
  ExpectTheCpuRunsGradients(GetParam(), {"--transport", "nccl"}, "nccl-");
}

INSTANTIATE_TEST_SUITE_P(Strategies, NcclGradients,
                         ::testing::Values("1f1b", "zbv", "dualpipe-v", "dualpipe"), StrategyName);

// ---- every rank a thread on one GPU (--device cuda:N), one op at a time ---------------------

// The same step with both ranks as threads on cuda:0, messages copied on the device.
class OneGpuGradients : public ::testing::TestWithParam<std::string> {};

TEST_P(OneGpuGradients, MatchTheCpuRun) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  ExpectTheCpuRunsGradients(GetParam(), {"--transport", "inproc", "--device", "cuda:0"},
                            "one-gpu-");
}

INSTANTIATE_TEST_SUITE_P(Strategies, OneGpuGradients,
                         ::testing::Values("1f1b", "zbv", "dualpipe-v", "dualpipe"), StrategyName);

// Ranks that take turns (--serial on the CPU, implied by --device cuda:N): in the measured step
// no op of one rank overlaps another rank's, and a GPU's ops are timed by CUDA events.
class TakingTurns : public ::testing::TestWithParam<std::string> {};

TEST_P(TakingTurns, NoTwoRanksOpsOverlap) {
  const bool gpu = GetParam() != "cpu";
  if (gpu) {
    const Status cuda = CudaDeviceAvailable();
    if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  }
  const Plan plan = TwoRankPlan("zb-h1");
  const testing::TempDir dir("turns");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary) << *SerializePlan(plan, ProtoFormat::kBinary);
  std::vector<std::string> args = {"profile",     path,
                                   "--transport", "inproc",
                                   "--steps",     "2",
                                   "--warmup",    "1",
                                   "--hidden",    "64",
                                   "--timeline",  dir.path() + "/measured.pb",
                                   "-o",          dir.path() + "/profile.json"};
  args.insert(args.end(), gpu ? std::initializer_list<std::string>{"--device", GetParam()}
                              : std::initializer_list<std::string>{"--serial"});
  const testing::CommandResult run = testing::RunTorchTool(args, 120);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("one op at a time"), std::string::npos) << run.output;
  // Each rank's bytes, counted in its own turns on a shared GPU (per thread on the CPU).
  EXPECT_NE(run.output.find("memory: rank 1 peak"), std::string::npos) << run.output;
  std::ifstream in(dir.path() + "/measured.pb", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const StatusOr<TimelineFile> measured = ParseTimelineFile(bytes, ProtoFormat::kBinary);
  ASSERT_TRUE(measured.ok()) << measured.status().message();
  std::vector<std::pair<double, double>> ops;  // every compute op of both ranks
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const RankTimeline& rank = measured->timeline.ranks[r];
    EXPECT_EQ(rank.clock, gpu ? OpClock::kCudaEvents : OpClock::kHost);
    for (size_t i = 0; i < plan.programs[r].actions.size(); ++i) {
      if (!IsCompute(plan.programs[r].actions[i].kind)) continue;
      ops.emplace_back(rank.actions[i].start, rank.actions[i].end);
    }
  }
  std::sort(ops.begin(), ops.end());
  ASSERT_EQ(ops.size(), 2u * 4u * 3u);  // F, I, W of 4 microbatches on each of 2 stages
  for (size_t k = 1; k < ops.size(); ++k) {
    EXPECT_GE(ops[k].first, ops[k - 1].second) << "op " << k << " of the step, by start";
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, TakingTurns, ::testing::Values("cpu", "cuda:0"), StrategyName);

TEST(OneGpu, WithoutAGpuTheRunIsRefusedNamingWhy) {
  if (CudaDeviceAvailable().ok()) GTEST_SKIP() << "this machine has a CUDA device";
  const testing::TempDir dir("one-gpu-refused");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary)
      << *SerializePlan(TwoRankPlan("1f1b"), ProtoFormat::kBinary);
  const testing::CommandResult run =
      testing::RunTorchTool({"run", "--plan", path, "--device", "cuda:0"}, 60);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("--device cuda:0: no CUDA device"), std::string::npos) << run.output;
}

TEST(OneGpu, DeviceFlagsOutsideAnInProcessRunAreRefused) {
  const testing::TempDir dir("one-gpu-flags");
  const std::string path = dir.path() + "/plan.pb";
  std::ofstream(path, std::ios::binary)
      << *SerializePlan(TwoRankPlan("1f1b"), ProtoFormat::kBinary);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--device", "gpu"}, "--device: 'gpu' is not cpu or cuda:N (N from 0)"},
      {{"--device", "cuda:-1"}, "--device: 'cuda:-1' is not cpu or cuda:N"},
      {{"--device", "cuda:0", "--transport", "gloo"},
       "--device: for ranks that are threads of this process (--transport inproc)"},
      {{"--serial"}, "--serial: for ranks that are threads of this process"},
  };
  for (const auto& [flags, expected] : cases) {
    std::vector<std::string> args = {"run", path};
    args.insert(args.end(), flags.begin(), flags.end());
    const testing::CommandResult run = testing::RunTorchTool(args, 60);
    EXPECT_EQ(run.exit_code, 2) << flags.front() << ": " << run.output;
    EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
  }
}

}  // namespace
}  // namespace pipeplan::torch_ext
