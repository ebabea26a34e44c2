// One conformance suite for every Transport backend: ordering per peer,
// groups, large and empty messages, size mismatches, abort and timeout. A backend joins by
// listing its factory in ConformanceBackends() (transport_conformance.h), defined once per
// test executable that links this file. Every wait here has a deadline, so a broken backend
// fails the test instead of hanging it.
#include "transport_conformance.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {
namespace {

TimePoint Soon(double seconds = 20.0) { return AfterSeconds(Clock::now(), seconds); }

std::vector<std::byte> Pattern(size_t bytes, uint32_t seed) {
  std::vector<std::byte> data(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (std::byte& b : data) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return data;
}

// Posts one op and returns its handle (failing the test on error).
std::unique_ptr<PendingOp> PostOne(Transport& transport, P2PKind kind, int peer,
                                   std::span<std::byte> buffer) {
  const P2POp op{kind, RankId(peer), buffer};
  auto handles = transport.Post(std::span<const P2POp>(&op, 1));
  EXPECT_TRUE(handles.ok()) << handles.status().message();
  if (!handles.ok() || handles->size() != 1) return nullptr;
  return std::move(handles->front());
}

void ExpectWaitOk(PendingOp* op) {
  ASSERT_NE(op, nullptr);
  const Status status = op->Wait(Soon());
  EXPECT_TRUE(status.ok()) << status.message();
}

class TransportConformance : public ::testing::TestWithParam<Backend> {
 protected:
  Transports Make(int ranks) { return GetParam().make(ranks); }
};

TEST_P(TransportConformance, KnowsItsRankAndWorld) {
  const Transports transports = Make(3);
  ASSERT_EQ(transports.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(transports[r]->rank(), RankId(r));
    EXPECT_EQ(transports[r]->world_size(), 3);
  }
}

// Messages between one ordered pair arrive in the order they were posted, whichever side
// posts first, and other pairs do not disturb them.
TEST_P(TransportConformance, KeepsOrderPerPeer) {
  const Transports t = Make(3);
  constexpr int kMessages = 200;
  std::thread receiver([&] {
    for (int i = 0; i < kMessages; ++i) {
      for (int from : {0, 2}) {
        uint32_t value = 0;
        auto op = PostOne(*t[1], P2PKind::kRecv, from,
                          std::as_writable_bytes(std::span<uint32_t>(&value, 1)));
        ExpectWaitOk(op.get());
        EXPECT_EQ(value, static_cast<uint32_t>(from * 1000 + i)) << "from rank " << from;
      }
    }
  });
  auto sender = [&](int from) {
    std::vector<uint32_t> values(kMessages);
    std::vector<std::unique_ptr<PendingOp>> ops;
    for (int i = 0; i < kMessages; ++i) {
      values[i] = static_cast<uint32_t>(from * 1000 + i);
      ops.push_back(PostOne(*t[from], P2PKind::kSend, 1,
                            std::as_writable_bytes(std::span<uint32_t>(&values[i], 1))));
    }
    for (auto& op : ops) ExpectWaitOk(op.get());
  };
  std::thread a(sender, 0);
  std::thread b(sender, 2);
  a.join();
  b.join();
  receiver.join();
}

// A group may send to and receive from the same peer: a ring exchange in one group per rank
// completes, and so does a two-way swap between two ranks.
TEST_P(TransportConformance, GroupsDoNotBlockWithinThemselves) {
  constexpr int kRanks = 4;
  const Transports t = Make(kRanks);
  std::vector<std::thread> threads;
  std::vector<uint64_t> got(kRanks, 0), swapped(kRanks, 0);
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      uint64_t mine = 100 + r, mine_again = 200 + r;
      const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
      const int partner = r ^ 1;
      const std::vector<P2POp> group = {
          {P2PKind::kSend, RankId(next), std::as_writable_bytes(std::span<uint64_t>(&mine, 1))},
          {P2PKind::kRecv, RankId(prev), std::as_writable_bytes(std::span<uint64_t>(&got[r], 1))},
          {P2PKind::kSend, RankId(partner),
           std::as_writable_bytes(std::span<uint64_t>(&mine_again, 1))},
          {P2PKind::kRecv, RankId(partner),
           std::as_writable_bytes(std::span<uint64_t>(&swapped[r], 1))},
      };
      auto handles = t[r]->Post(group);
      ASSERT_TRUE(handles.ok()) << handles.status().message();
      ASSERT_EQ(handles->size(), group.size());
      for (auto& op : *handles) ExpectWaitOk(op.get());
    });
  }
  for (auto& thread : threads) thread.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(got[r], static_cast<uint64_t>(100 + (r + kRanks - 1) % kRanks)) << "rank " << r;
    EXPECT_EQ(swapped[r], static_cast<uint64_t>(200 + (r ^ 1))) << "rank " << r;
  }
}

TEST_P(TransportConformance, CarriesLargeAndEmptyMessagesIntact) {
  const Transports t = Make(2);
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, size_t{64} << 20}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes");
    std::vector<std::byte> sent = Pattern(bytes, static_cast<uint32_t>(bytes));
    std::vector<std::byte> received(bytes, std::byte{0});
    auto recv = PostOne(*t[1], P2PKind::kRecv, 0, received);
    auto send = PostOne(*t[0], P2PKind::kSend, 1, sent);
    ExpectWaitOk(send.get());
    ExpectWaitOk(recv.get());
    EXPECT_TRUE(received == sent);
    ASSERT_NE(recv, nullptr);
    EXPECT_LE(recv->completed_at(), Clock::now());
  }
}

// A message that does not fit its receive fails both sides with a message naming the sizes:
// the receive when waited, the send at the latest once the receive has been waited (a
// backend may only learn of the mismatch on the receiving side).
TEST_P(TransportConformance, RejectsASizeMismatchOnBothSides) {
  const Transports t = Make(2);
  std::vector<std::byte> sent(16), received(8);
  auto send = PostOne(*t[0], P2PKind::kSend, 1, sent);
  auto recv = PostOne(*t[1], P2PKind::kRecv, 0, received);
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  for (PendingOp* op : {recv.get(), send.get()}) {
    const Status status = op->Wait(Soon());
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("16"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("8"), std::string::npos) << status.message();
  }
}

TEST_P(TransportConformance, RejectsAPeerOutsideTheWorld) {
  const Transports t = Make(2);
  std::vector<std::byte> buffer(4);
  for (int peer : {-1, 2}) {
    const P2POp op{P2PKind::kSend, RankId(peer), buffer};
    auto handles = t[0]->Post(std::span<const P2POp>(&op, 1));
    ASSERT_FALSE(handles.ok());
    EXPECT_EQ(handles.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(handles.status().message().find(std::to_string(peer)), std::string::npos);
  }
}

// A wait with a deadline returns DeadlineExceeded when no peer shows up, close to it.
TEST_P(TransportConformance, WaitTimesOutAtItsDeadline) {
  const Transports t = Make(2);
  std::vector<std::byte> buffer(4);
  auto recv = PostOne(*t[1], P2PKind::kRecv, 0, buffer);
  ASSERT_NE(recv, nullptr);
  const TimePoint begin = Clock::now();
  const Status status = recv->Wait(AfterSeconds(begin, 0.05));
  const double waited = SecondsBetween(begin, Clock::now());
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.message();
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);
}

// IsCompleted never claims a transfer too early: a send is not completed before its receive
// is posted. A backend that tells completion without a wait says so once the message landed,
// and Wait then returns at once.
TEST_P(TransportConformance, IsCompletedNeverClaimsTooEarly) {
  const Transports t = Make(2);
  std::vector<std::byte> sent = Pattern(4096, 7);
  std::vector<std::byte> got(sent.size());
  auto send = PostOne(*t[0], P2PKind::kSend, 1, sent);
  ASSERT_NE(send, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(send->IsCompleted());
  auto recv = PostOne(*t[1], P2PKind::kRecv, 0, got);
  ExpectWaitOk(recv.get());
  EXPECT_EQ(got, sent);
  if (GetParam().tells_completion) {
    const TimePoint deadline = Soon();
    while (!send->IsCompleted() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(send->IsCompleted());
    EXPECT_TRUE(send->Wait(Clock::now()).ok());
  }
  ExpectWaitOk(send.get());
}

// Abort on one rank wakes a waiter on another with the reason, and every later post fails.
TEST_P(TransportConformance, AbortWakesEveryRankWithTheReason) {
  const Transports t = Make(3);
  std::vector<std::byte> buffer(4);
  auto recv = PostOne(*t[1], P2PKind::kRecv, 0, buffer);
  ASSERT_NE(recv, nullptr);
  Status waited;
  std::thread waiter([&] { waited = recv->Wait(Soon()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TimePoint aborted_at = Clock::now();
  t[2]->Abort(Internal("rank 2 failed on purpose"));
  waiter.join();
  EXPECT_LT(SecondsBetween(aborted_at, Clock::now()), 5.0);
  EXPECT_EQ(waited.code(), StatusCode::kAborted);
  EXPECT_NE(waited.message().find("rank 2 failed on purpose"), std::string::npos);

  t[0]->Abort(Internal("a second reason"));  // the first reason wins
  for (int r = 0; r < 3; ++r) {
    const P2POp op{P2PKind::kSend, RankId((r + 1) % 3), buffer};
    auto handles = t[r]->Post(std::span<const P2POp>(&op, 1));
    ASSERT_FALSE(handles.ok()) << "rank " << r;
    EXPECT_EQ(handles.status().code(), StatusCode::kAborted);
    EXPECT_NE(handles.status().message().find("on purpose"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformance, ::testing::ValuesIn(ConformanceBackends()),
                         [](const ::testing::TestParamInfo<Backend>& param) {
                           return param.param.name;
                         });

}  // namespace
}  // namespace pipeplan::runtime
