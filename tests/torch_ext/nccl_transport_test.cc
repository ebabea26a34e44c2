// The NCCL transport. On a machine without a CUDA device (CI) only the refusal is checked and
// the GPU tests skip, saying why; with a GPU, one rank sends to itself through NCCL (one GPU
// cannot host two NCCL ranks, so the multi-rank conformance run needs a multi-GPU machine).
#include "pipeplan/torch_ext/nccl_transport.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"
#include "torch_test_support.h"

namespace pipeplan::torch_ext {
namespace {

TEST(NcclTransport, WithoutAGpuTheRunIsRefusedNamingWhy) {
  const Status cuda = CudaDeviceAvailable();
  if (cuda.ok()) GTEST_SKIP() << "this machine has a CUDA device; the refusal cannot be seen";
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

TEST(NcclTransport, OneRankSendsToItselfOnTheGpu) {
  const Status cuda = CudaDeviceAvailable();
  if (!cuda.ok()) GTEST_SKIP() << "GPU test: " << cuda.message();
  Rendezvous rendezvous;
  rendezvous.port = FreeLocalPort();
  ASSERT_NE(rendezvous.port, 0);
  StatusOr<GlooConnection> gloo = ConnectGloo(rendezvous);
  ASSERT_TRUE(gloo.ok()) << gloo.status().message();
  StatusOr<std::unique_ptr<runtime::Transport>> nccl =
      ConnectNccl(*gloo->coordinator, 0, 1, 0, std::chrono::milliseconds(30000));
  ASSERT_TRUE(nccl.ok()) << nccl.status().message();

  const at::Tensor sent = at::arange(1024, at::TensorOptions().dtype(at::kFloat).device("cuda:0"));
  const at::Tensor received = at::zeros_like(sent);
  const auto bytes = [](const at::Tensor& t) {
    return std::span<std::byte>(static_cast<std::byte*>(t.data_ptr()), t.nbytes());
  };
  const std::vector<runtime::P2POp> ops = {{runtime::P2PKind::kSend, RankId(0), bytes(sent)},
                                           {runtime::P2PKind::kRecv, RankId(0), bytes(received)}};
  auto pending = (*nccl)->Post(ops);
  ASSERT_TRUE(pending.ok()) << pending.status().message();
  for (auto& op : *pending) {
    const Status waited = op->Wait(runtime::Clock::now() + std::chrono::seconds(30));
    ASSERT_TRUE(waited.ok()) << waited.message();
  }
  EXPECT_TRUE(at::equal(sent, received));
}

}  // namespace
}  // namespace pipeplan::torch_ext
