#include "pipeplan/runtime/inproc_transport.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace pipeplan::runtime {
namespace {

// One posted transfer. `done`, `error` and `completed_at` change under the owner rank's
// mailbox mutex; `done` is also read without it (release/acquire) by a briefly spinning waiter.
struct OpState {
  P2POp op;
  RankId owner;
  std::atomic<bool> done = false;
  Status error;
  TimePoint completed_at;
};

// How long a waiter polls before it sleeps: most transfers in a running pipeline complete
// within a few microseconds of the wait, and a sleeping thread costs a futex wake-up (tens of
// microseconds on a busy machine) to get going again.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(20);

// Where a rank waits for its own operations to complete.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
};

// Unmatched sends and receives of one ordered pair (sender -> receiver), oldest first. At
// most one of the two queues is non-empty.
struct Channel {
  std::mutex mutex;
  std::deque<std::shared_ptr<OpState>> sends;
  std::deque<std::shared_ptr<OpState>> recvs;
};

std::string Pair(RankId from, RankId to) {
  return "rank " + std::to_string(from.value) + " -> rank " + std::to_string(to.value);
}

}  // namespace

class InProcWorld {
 public:
  InProcWorld(int ranks, CopyBytes copy)
      : ranks_(ranks),
        copy_(std::move(copy)),
        mailboxes_(static_cast<size_t>(ranks)),
        channels_(static_cast<size_t>(ranks) * static_cast<size_t>(ranks)) {}

  int ranks() const { return ranks_; }

  Status Post(RankId self, const P2POp& op, std::shared_ptr<OpState>& out) {
    if (op.peer.value < 0 || op.peer.value >= ranks_) {
      return InvalidArgument("rank " + std::to_string(self.value) + " addressed rank " +
                             std::to_string(op.peer.value) + ", but the world has " +
                             std::to_string(ranks_) + " ranks");
    }
    auto state = std::make_shared<OpState>();
    state->op = op;
    state->owner = self;
    const bool sending = op.kind == P2PKind::kSend;
    const RankId from = sending ? self : op.peer;
    const RankId to = sending ? op.peer : self;
    Channel& channel = ChannelOf(from, to);
    {
      // Checked under the channel lock: once Abort has emptied the queues, no operation is
      // queued or matched again, so no peer touches a failed rank's buffers.
      const std::lock_guard lock(channel.mutex);
      if (Status aborted = AbortReason(); !aborted.ok()) return aborted;
      auto& mine = sending ? channel.sends : channel.recvs;
      auto& theirs = sending ? channel.recvs : channel.sends;
      // No cap: a validated plan queues at most the transfers it posts between two matches.
      if (theirs.empty()) {
        mine.push_back(state);
      } else {
        std::shared_ptr<OpState> other = std::move(theirs.front());
        theirs.pop_front();
        Match(sending ? *state : *other, sending ? *other : *state, from, to);
      }
    }
    out = std::move(state);
    return Status::Ok();
  }

  Status Wait(OpState& state, TimePoint deadline) {
    const TimePoint spin_until = std::min(deadline, Clock::now() + kSpinBeforeSleep);
    while (!state.done.load(std::memory_order_acquire) && Clock::now() < spin_until) {
      std::this_thread::yield();
    }
    Mailbox& mailbox = MailboxOf(state.owner);
    std::unique_lock lock(mailbox.mutex);
    auto finished = [&] {
      return state.done.load(std::memory_order_relaxed) || !abort_reason_.ok();
    };
    if (deadline == TimePoint::max()) {
      mailbox.changed.wait(lock, finished);
    } else if (!mailbox.changed.wait_until(lock, deadline, finished)) {
      return DeadlineExceeded("rank " + std::to_string(state.owner.value) + ": the " +
                              (state.op.kind == P2PKind::kSend ? "send to" : "receive from") +
                              " rank " + std::to_string(state.op.peer.value) +
                              " did not complete in time");
    }
    if (state.done.load(std::memory_order_relaxed)) return state.error;
    return Aborted(abort_reason_.message());
  }

  void Abort(const Status& reason) {
    {
      const std::lock_guard lock(abort_mutex_);
      if (!abort_reason_.ok()) return;
      // Written under every mailbox lock, so a waiter sees it before it sleeps or is woken.
      std::vector<std::unique_lock<std::mutex>> locks;
      locks.reserve(mailboxes_.size());
      for (Mailbox& mailbox : mailboxes_) locks.emplace_back(mailbox.mutex);
      abort_reason_ = reason.ok() ? Aborted("aborted") : reason;
    }
    for (Mailbox& mailbox : mailboxes_) mailbox.changed.notify_all();
    // Their waiters see the abort; a queued operation must never be matched later.
    for (Channel& channel : channels_) {
      const std::lock_guard lock(channel.mutex);
      channel.sends.clear();
      channel.recvs.clear();
    }
  }

 private:
  // Ok, or the abort reason as seen by everyone but its author: Aborted, with its message.
  Status AbortReason() {
    const std::lock_guard lock(abort_mutex_);
    return abort_reason_.ok() ? Status::Ok() : Aborted(abort_reason_.message());
  }

  // Copies the bytes of `send` into `recv` and completes both. Called under the channel lock.
  void Match(OpState& send, OpState& recv, RankId from, RankId to) {
    Status error;
    if (send.op.buffer.size() != recv.op.buffer.size()) {
      error = InvalidArgument(Pair(from, to) + ": a message of " +
                              std::to_string(send.op.buffer.size()) + " bytes met a receive of " +
                              std::to_string(recv.op.buffer.size()) +
                              " bytes (sends and receives pair up in order)");
    } else if (!send.op.buffer.empty()) {
      if (copy_) {
        const Status copied = copy_(recv.op.buffer, send.op.buffer);
        if (!copied.ok()) {
          error = copied.WithContext(Pair(from, to) + ": copying a message of " +
                                     std::to_string(send.op.buffer.size()) + " bytes");
        }
      } else {
        std::memcpy(recv.op.buffer.data(), send.op.buffer.data(), send.op.buffer.size());
      }
    }
    const TimePoint now = Clock::now();
    Complete(send, error, now);
    Complete(recv, error, now);
  }

  void Complete(OpState& state, const Status& error, TimePoint now) {
    Mailbox& mailbox = MailboxOf(state.owner);
    {
      const std::lock_guard lock(mailbox.mutex);
      state.error = error;
      state.completed_at = now;
      state.done.store(true, std::memory_order_release);
    }
    mailbox.changed.notify_all();
  }

  Mailbox& MailboxOf(RankId rank) { return mailboxes_[static_cast<size_t>(rank.value)]; }
  Channel& ChannelOf(RankId from, RankId to) {
    return channels_[static_cast<size_t>(from.value) * static_cast<size_t>(ranks_) +
                     static_cast<size_t>(to.value)];
  }

  int ranks_;
  CopyBytes copy_;  // empty: memcpy
  std::vector<Mailbox> mailboxes_;
  std::vector<Channel> channels_;
  std::mutex abort_mutex_;
  Status abort_reason_;  // guarded by abort_mutex_ and by every mailbox mutex for writes
};

namespace {

class InProcPendingOp final : public PendingOp {
 public:
  InProcPendingOp(std::shared_ptr<InProcWorld> world, std::shared_ptr<OpState> state)
      : world_(std::move(world)), state_(std::move(state)) {}

  Status Wait(TimePoint deadline) override { return world_->Wait(*state_, deadline); }
  bool IsCompleted() override { return state_->done.load(std::memory_order_acquire); }
  TimePoint completed_at() const override { return state_->completed_at; }

 private:
  std::shared_ptr<InProcWorld> world_;
  std::shared_ptr<OpState> state_;
};

class InProcTransport final : public Transport {
 public:
  InProcTransport(std::shared_ptr<InProcWorld> world, RankId rank)
      : world_(std::move(world)), rank_(rank) {}

  RankId rank() const override { return rank_; }
  int world_size() const override { return world_->ranks(); }

  StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) override {
    std::vector<std::unique_ptr<PendingOp>> pending;
    pending.reserve(ops.size());
    for (const P2POp& op : ops) {
      std::shared_ptr<OpState> state;
      PIPEPLAN_RETURN_IF_ERROR(world_->Post(rank_, op, state));
      pending.push_back(std::make_unique<InProcPendingOp>(world_, std::move(state)));
    }
    return pending;
  }

  void Abort(const Status& reason) override { world_->Abort(reason); }

 private:
  std::shared_ptr<InProcWorld> world_;
  RankId rank_;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> MakeInProcTransports(int ranks, CopyBytes copy) {
  auto world = std::make_shared<InProcWorld>(ranks, std::move(copy));
  std::vector<std::unique_ptr<Transport>> transports;
  transports.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    transports.push_back(std::make_unique<InProcTransport>(world, RankId(r)));
  }
  return transports;
}

}  // namespace pipeplan::runtime
