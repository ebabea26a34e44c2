// The local launcher: this test binary started once per rank with torchrun's variables; each
// child ends before any test runs, as PIPEPLAN_RANK_PROCESSES_TEST tells it to.
#include "pipeplan/runtime/rank_processes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pipeplan::runtime {
namespace {

constexpr const char* kMode = "PIPEPLAN_RANK_PROCESSES_TEST";

// A child: "env" exits 0 where its variables are torchrun's (else 9); "fail" exits with code
// 3 on rank 1 and is killed by SIGKILL on rank 2; "hang" exits with 1 on rank 0 and sleeps on
// the others.
[[maybe_unused]] const bool kChildEnded = [] {
  const char* mode = std::getenv(kMode);
  const char* rank_text = std::getenv("RANK");
  if (mode == nullptr || rank_text == nullptr) return false;
  const int rank = std::atoi(rank_text);
  const std::string_view how(mode);
  if (how == "env") {
    const char* local = std::getenv("LOCAL_RANK");
    const char* world = std::getenv("WORLD_SIZE");
    const char* addr = std::getenv("MASTER_ADDR");
    const char* port = std::getenv("MASTER_PORT");
    const bool right = local != nullptr && std::string_view(local) == rank_text &&
                       world != nullptr && std::string_view(world) == "3" && addr != nullptr &&
                       std::string_view(addr) == "127.0.0.1" && port != nullptr &&
                       std::atoi(port) > 0;
    std::_Exit(right ? 0 : 9);
  }
  if (how == "fail") {
    if (rank == 2) std::raise(SIGKILL);
    std::_Exit(rank == 1 ? 3 : 0);
  }
  if (how == "hang") {
    if (rank == 0) std::_Exit(1);
    for (;;) pause();
  }
  std::_Exit(8);
}();

class RankProcesses : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kMode); }
  static Status Launch(const char* mode, int ranks, double timeout_s) {
    setenv(kMode, mode, 1);
    return LaunchLocalRanks(ranks, timeout_s, "rank_processes_test");
  }
};

TEST(FreeLocalPort, GivesAPortOfTheUserRange) {
  const int port = FreeLocalPort();
  EXPECT_GT(port, 1023);
  EXPECT_LT(port, 65536);
}

TEST_F(RankProcesses, StartsEachRankWithTorchrunsVariables) {
  const Status status = Launch("env", 3, 5.0);
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_F(RankProcesses, NamesEachRankThatFailedAndHowItEnded) {
  const Status status = Launch("fail", 3, 5.0);
  ASSERT_FALSE(status.ok());
  const std::string& message = status.message();
  EXPECT_NE(message.find("rank 1 exited with code 3"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 2 was killed by signal 9"), std::string::npos) << message;
  EXPECT_EQ(message.find("rank 0"), std::string::npos) << message;
}

// Rank 0 fails; rank 1 would wait for it forever: it is killed after the timeout (+5 s).
TEST_F(RankProcesses, KillsTheRanksThatOutliveAFailure) {
  const Status status = Launch("hang", 2, 0.1);
  ASSERT_FALSE(status.ok());
  const std::string& message = status.message();
  EXPECT_NE(message.find("rank 0 exited with code 1"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 was killed by signal 9"), std::string::npos) << message;
}

}  // namespace
}  // namespace pipeplan::runtime
