#include "pipeplan/torch_ext/gloo_transport.h"

#include <ATen/ATen.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "pipeplan/model/text_format.h"

namespace pipeplan::torch_ext {
namespace {

using runtime::Clock;
using runtime::P2PKind;
using runtime::P2POp;
using runtime::PendingOp;
using runtime::TimePoint;

constexpr char kAbortKey[] = "pipeplan/abort";
constexpr auto kAbortPoll = std::chrono::milliseconds(20);

// The run's abort reason in the store, shared by the Gloo transport and the coordinator (which
// the NCCL transport watches). Both throw when the store is gone.
Status PublishAbortReason(c10d::Store& store, const Status& reason) {
  // The first reason published wins on every rank.
  const std::string& text = reason.message();
  const std::vector<uint8_t> published =
      store.compareSet(kAbortKey, {}, std::vector<uint8_t>(text.begin(), text.end()));
  return {reason.code(), std::string(published.begin(), published.end())};
}

std::optional<Status> ReadAbortReason(c10d::Store& store) {
  if (!store.check({kAbortKey})) return std::nullopt;
  const std::vector<uint8_t> reason = store.get(kAbortKey);
  return Status(StatusCode::kAborted, std::string(reason.begin(), reason.end()));
}
// Tags: per peer and direction, message n gets header tag n * kTagStride and payload tag
// n * kTagStride + 1 + size % (kTagStride - 1), so a payload of the wrong size never matches
// (Gloo aborts the process on an oversized message) while its header reports the mismatch.
constexpr int64_t kTagStride = 2048;
constexpr int64_t kSequenceWrap = (int64_t{1} << 31) / kTagStride;

int HeaderTag(int64_t sequence) {
  return static_cast<int>((sequence % kSequenceWrap) * kTagStride);
}
int PayloadTag(int64_t sequence, size_t bytes) {
  return HeaderTag(sequence) + 1 + static_cast<int>(bytes % (kTagStride - 1));
}

at::Tensor ByteTensor(std::span<std::byte> bytes) {
  return at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, at::kByte);
}

std::string What(const std::exception& e) {
  std::string text = e.what();
  const size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

std::chrono::milliseconds Until(TimePoint deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

class GlooTransport;

// One posted message: a header and (unless empty) a payload work. A receive is waited by its
// caller; a send by its peer's SendReaper (Reap), which records the result for Wait and
// IsCompleted: Gloo tells a send's end only to a thread that blocks on it.
class GlooPendingOp final : public PendingOp {
 public:
  GlooPendingOp(GlooTransport* transport, P2POp op, int64_t sequence)
      : transport_(transport), op_(op), sequence_(sequence) {}

  Status Start(c10d::ProcessGroupGloo& group);
  Status Wait(TimePoint deadline) override;
  bool IsCompleted() override;
  TimePoint completed_at() const override { return completed_at_; }
  void Abort();
  // A send only, on its reaper's thread: blocks until the send ended, then records it.
  void Reap();

 private:
  // Blocks on the works until they end or `deadline`.
  Status Complete(TimePoint deadline);
  Status WaitWork(const c10::intrusive_ptr<c10d::Work>& work, TimePoint deadline);
  Status CheckHeader();
  // Records the end of the transfer (not a deadline), for every waiter.
  void Record(const Status& status);

  GlooTransport* transport_;
  P2POp op_;
  int64_t sequence_;
  at::Tensor header_ = at::zeros({1}, at::kLong);
  at::Tensor payload_;
  std::mutex mutex_;  // guards the works against Abort from another thread
  c10::intrusive_ptr<c10d::Work> header_work_;
  c10::intrusive_ptr<c10d::Work> payload_work_;
  std::mutex result_mutex_;  // guards result_ and completed_at_ (a send's reaper writes them)
  std::condition_variable ended_;
  std::optional<Status> result_;
  TimePoint completed_at_;
};

// Waits one peer's sends in the order they were posted, on a thread of its own.
class SendReaper {
 public:
  SendReaper() : thread_([this](const std::stop_token& stop) { Loop(stop); }) {}

  void Add(std::shared_ptr<GlooPendingOp> send) {
    {
      const std::lock_guard lock(mutex_);
      queue_.push_back(std::move(send));
    }
    added_.notify_one();
  }

 private:
  void Loop(const std::stop_token& stop) {
    while (true) {
      std::shared_ptr<GlooPendingOp> send;
      {
        std::unique_lock lock(mutex_);
        if (!added_.wait(lock, stop, [&] { return !queue_.empty(); })) return;
        send = std::move(queue_.front());
        queue_.pop_front();
      }
      send->Reap();
    }
  }

  std::mutex mutex_;
  std::condition_variable_any added_;
  std::deque<std::shared_ptr<GlooPendingOp>> queue_;
  std::jthread thread_;  // last: started once the queue exists
};

class GlooTransport final : public runtime::Transport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Store> store,
                c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank, int world)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        world_(world),
        sent_(world, 0),
        received_(world, 0),
        watcher_([this](const std::stop_token& stop) { WatchForAbort(stop); }),
        reapers_(static_cast<size_t>(world)) {}

  ~GlooTransport() override {
    watcher_.request_stop();
    watcher_.join();
    std::vector<std::weak_ptr<GlooPendingOp>> live;
    {
      const std::lock_guard lock(mutex_);
      live.swap(live_);
    }
    for (const auto& weak : live) {
      if (auto op = weak.lock()) op->Abort();
    }
    reapers_.clear();  // joined here, while what their sends use still exists
  }

  RankId rank() const override { return RankId(rank_); }
  int world_size() const override { return world_; }

  StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) override {
    for (const P2POp& op : ops) {
      if (op.peer.value < 0 || op.peer.value >= world_ || op.peer.value == rank_) {
        return InvalidArgument("rank " + std::to_string(rank_) + " cannot exchange messages " +
                               "with rank " + std::to_string(op.peer.value) + " (world of " +
                               std::to_string(world_) + ")");
      }
    }
    std::vector<std::unique_ptr<PendingOp>> handles;
    const std::lock_guard lock(mutex_);
    if (aborted_) return *aborted_;
    for (const P2POp& op : ops) {
      std::vector<int64_t>& counter = op.kind == P2PKind::kSend ? sent_ : received_;
      auto pending = std::make_shared<GlooPendingOp>(this, op, counter[op.peer.value]++);
      PIPEPLAN_RETURN_IF_ERROR(pending->Start(*group_));
      live_.push_back(pending);
      if (op.kind == P2PKind::kSend) ReaperOf(op.peer.value).Add(pending);
      handles.push_back(std::make_unique<SharedOp>(std::move(pending)));
    }
    std::erase_if(live_, [](const std::weak_ptr<GlooPendingOp>& w) { return w.expired(); });
    return handles;
  }

  void Abort(const Status& reason) override {
    Status winner = reason;
    try {
      winner = PublishAbortReason(*store_, reason);
    } catch (const std::exception&) {
      // The store is gone (rank 0 died): abort locally with our own reason.
    }
    AbortLocally(winner);
  }

  std::optional<Status> aborted() {
    const std::lock_guard lock(mutex_);
    return aborted_;
  }

  // A failing peer publishes its reason before it exits and closes its connections, so when Gloo
  // reports a closed connection the reason is usually in the store already, though the watcher
  // has not polled yet: look now, so that the diagnosis and not its echo is reported.
  std::optional<Status> PublishedAbort() {
    if (auto local = aborted()) return local;
    try {
      if (auto reason = ReadPublishedReason()) AbortLocally(*reason);
    } catch (const std::exception&) {
      return std::nullopt;  // the store is gone too: the Gloo error is all there is to say
    }
    return aborted();
  }

 private:
  // Keeps a posted op alive for Abort while the caller holds its handle.
  class SharedOp final : public PendingOp {
   public:
    explicit SharedOp(std::shared_ptr<GlooPendingOp> op) : op_(std::move(op)) {}
    Status Wait(TimePoint deadline) override { return op_->Wait(deadline); }
    bool IsCompleted() override { return op_->IsCompleted(); }
    TimePoint completed_at() const override { return op_->completed_at(); }

   private:
    std::shared_ptr<GlooPendingOp> op_;
  };

  // Under mutex_.
  SendReaper& ReaperOf(int peer) {
    std::unique_ptr<SendReaper>& reaper = reapers_[static_cast<size_t>(peer)];
    if (reaper == nullptr) reaper = std::make_unique<SendReaper>();
    return *reaper;
  }

  void AbortLocally(const Status& reason) {
    std::vector<std::shared_ptr<GlooPendingOp>> live;
    {
      const std::lock_guard lock(mutex_);
      if (aborted_) return;
      aborted_ = Status(StatusCode::kAborted, reason.message());
      for (const auto& weak : live_) {
        if (auto op = weak.lock()) live.push_back(std::move(op));
      }
    }
    for (const auto& op : live) op->Abort();
  }

  // The reason some rank published, if one did; throws when the store is gone.
  std::optional<Status> ReadPublishedReason() { return ReadAbortReason(*store_); }

  void WatchForAbort(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(kAbortPoll);
      try {
        if (auto reason = ReadPublishedReason()) {
          AbortLocally(*reason);
          return;
        }
      } catch (const std::exception& e) {
        AbortLocally(Status(StatusCode::kAborted,
                            "lost the rendezvous store (did rank 0 exit?): " + What(e)));
        return;
      }
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int rank_;
  int world_;
  std::mutex mutex_;
  std::vector<int64_t> sent_;
  std::vector<int64_t> received_;
  std::vector<std::weak_ptr<GlooPendingOp>> live_;
  std::optional<Status> aborted_;
  std::jthread watcher_;
  std::vector<std::unique_ptr<SendReaper>> reapers_;  // by peer, made at its first send
};

Status GlooPendingOp::Start(c10d::ProcessGroupGloo& group) {
  const int peer = op_.peer.value;
  try {
    std::vector<at::Tensor> header{header_};
    if (op_.kind == P2PKind::kSend) {
      header_.fill_(static_cast<int64_t>(op_.buffer.size()));
      header_work_ = group.send(header, peer, HeaderTag(sequence_));
      if (!op_.buffer.empty()) {
        std::vector<at::Tensor> payload{ByteTensor(op_.buffer)};
        payload_work_ = group.send(payload, peer, PayloadTag(sequence_, op_.buffer.size()));
      }
    } else {
      header_work_ = group.recv(header, peer, HeaderTag(sequence_));
      if (!op_.buffer.empty()) {
        std::vector<at::Tensor> payload{ByteTensor(op_.buffer)};
        payload_work_ = group.recv(payload, peer, PayloadTag(sequence_, op_.buffer.size()));
      }
    }
  } catch (const std::exception& e) {
    return Internal("gloo could not post a message to/from rank " + std::to_string(peer) + ": " +
                    What(e));
  }
  return Status::Ok();
}

void GlooPendingOp::Abort() {
  const std::lock_guard lock(mutex_);
  for (auto* work : {&header_work_, &payload_work_}) {
    if (*work && !(*work)->isCompleted()) (*work)->abort();
  }
}

Status GlooPendingOp::WaitWork(const c10::intrusive_ptr<c10d::Work>& work, TimePoint deadline) {
  if (!work) return Status::Ok();
  bool done = false;
  try {
    done = deadline == TimePoint::max() ? work->wait() : work->wait(Until(deadline));
  } catch (const std::exception& e) {
    if (auto aborted = transport_->PublishedAbort()) return *aborted;
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("no message from/to rank " + std::to_string(op_.peer.value) +
                              " before the deadline");
    }
    return Internal("gloo failed on a message " +
                    std::string(op_.kind == P2PKind::kSend ? "to" : "from") + " rank " +
                    std::to_string(op_.peer.value) + ": " + What(e));
  }
  if (!done) {
    if (auto aborted = transport_->aborted()) return *aborted;
    return Aborted("the message to/from rank " + std::to_string(op_.peer.value) + " was aborted");
  }
  return Status::Ok();
}

Status GlooPendingOp::CheckHeader() {
  const int64_t sent = header_.item<int64_t>();
  const auto expected = static_cast<int64_t>(op_.buffer.size());
  if (sent == expected) return Status::Ok();
  Status mismatch = InvalidArgument("rank " + std::to_string(op_.peer.value) +
                                    " sent a message of " + std::to_string(sent) +
                                    " bytes but rank " + std::to_string(transport_->rank().value) +
                                    "'s receive expects " + std::to_string(expected) + " bytes");
  // The payload will never match: the pair's stream is broken, so everyone stops.
  transport_->Abort(mismatch);
  return mismatch;
}

Status GlooPendingOp::Complete(TimePoint deadline) {
  Status status = WaitWork(header_work_, deadline);
  if (status.ok() && op_.kind == P2PKind::kRecv) status = CheckHeader();
  if (status.ok()) status = WaitWork(payload_work_, deadline);
  return status;
}

void GlooPendingOp::Record(const Status& status) {
  {
    const std::lock_guard lock(result_mutex_);
    if (status.ok()) completed_at_ = Clock::now();
    result_ = status;
  }
  ended_.notify_all();
}

void GlooPendingOp::Reap() { Record(Complete(TimePoint::max())); }

bool GlooPendingOp::IsCompleted() {
  const std::lock_guard lock(result_mutex_);
  return result_.has_value();
}

Status GlooPendingOp::Wait(TimePoint deadline) {
  if (op_.kind == P2PKind::kSend) {
    std::unique_lock lock(result_mutex_);
    const auto ended = [&] { return result_.has_value(); };
    if (deadline == TimePoint::max()) {
      ended_.wait(lock, ended);
    } else if (!ended_.wait_until(lock, deadline, ended)) {
      return DeadlineExceeded("no message to rank " + std::to_string(op_.peer.value) +
                              " before the deadline");
    }
    return *result_;
  }
  {
    const std::lock_guard lock(result_mutex_);
    if (result_) return *result_;
  }
  Status status = Complete(deadline);
  if (status.code() != StatusCode::kDeadlineExceeded) Record(status);
  return status;
}

class StoreCoordinator final : public runtime::Coordinator {
 public:
  StoreCoordinator(c10::intrusive_ptr<c10d::Store> store, int rank, int world)
      : store_(std::move(store)), rank_(rank), world_(world) {}

  // Each rank also leaves its own mark, so that a barrier that fails can name the ranks that
  // never came (a rank that died between steps) instead of only timing out.
  Status Barrier(const std::string& name, std::chrono::milliseconds timeout) override {
    const std::string key = "pipeplan/barrier/" + name;
    try {
      store_->set(key + "/rank/" + std::to_string(rank_), std::vector<uint8_t>{1});
      if (store_->add(key, 1) == world_) store_->set(key + "/open", std::vector<uint8_t>{1});
      store_->wait({key + "/open"}, timeout);
    } catch (const std::exception& e) {
      return DeadlineExceeded("barrier '" + name + "' failed: " + WhyNotOpen(key, timeout, e));
    }
    return Status::Ok();
  }

  Status Put(const std::string& key, const std::string& value) override {
    try {
      store_->set("pipeplan/blob/" + key, std::vector<uint8_t>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      return Internal("could not publish '" + key + "': " + What(e));
    }
    return Status::Ok();
  }

  StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({"pipeplan/blob/" + key}, timeout);
      const std::vector<uint8_t> value = store_->get("pipeplan/blob/" + key);
      return std::string(value.begin(), value.end());
    } catch (const std::exception& e) {
      return DeadlineExceeded("'" + key + "' never arrived: " + What(e));
    }
  }

  Status PublishAbort(const Status& reason) override {
    try {
      return PublishAbortReason(*store_, reason);
    } catch (const std::exception&) {
      return reason;  // the store is gone: ours is the reason
    }
  }

  std::optional<Status> PublishedAbort() override {
    try {
      return ReadAbortReason(*store_);
    } catch (const std::exception& e) {
      return Status(StatusCode::kAborted,
                    "lost the rendezvous store (did rank 0 exit?): " + What(e));
    }
  }

 private:
  // The ranks that left no mark at the barrier `key`, or that the store itself is gone.
  std::string WhyNotOpen(const std::string& key, std::chrono::milliseconds timeout,
                         const std::exception& error) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < world_; ++r) {
        if (!store_->check({key + "/rank/" + std::to_string(r)})) missing.push_back(r);
      }
    } catch (const std::exception&) {
      return "lost the rendezvous store (did its host exit: rank 0, or torchrun's agent?): " +
             What(error);
    }
    if (missing.empty()) return What(error);
    std::string ranks;
    for (const int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return std::string(missing.size() == 1 ? "rank " : "ranks ") + ranks +
           " did not reach it within " + FormatNumber(static_cast<double>(timeout.count()) / 1000) +
           " s" + " (exited or stuck; every other rank arrived)";
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int world_;
};

StatusOr<int> ParseEnvInt(const char* name, int min) {
  const char* text = std::getenv(name);
  if (text == nullptr) return InvalidArgument(std::string(name) + " is not set");
  int value = 0;
  const std::string_view view(text);
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc() || end != view.data() + view.size() || value < min) {
    return InvalidArgument(std::string(name) + "='" + text +
                           "' is not an integer >= " + std::to_string(min));
  }
  return value;
}

// Where this rank's Gloo connections bind, as torch's own Gloo process group chooses: the
// interfaces GLOO_SOCKET_IFNAME names, else the address this host's name resolves to. Not
// MASTER_ADDR's: on any node but the master that is not a local address. A loopback master
// means every rank is on this machine (the --local-ranks launcher): loopback it is.
std::vector<std::shared_ptr<gloo::transport::Device>> LocalGlooDevices(const std::string& master) {
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  const char* interfaces = std::getenv("GLOO_SOCKET_IFNAME");
  if (interfaces != nullptr && *interfaces != '\0') {
    std::string_view rest(interfaces);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string name(rest.substr(0, comma));
      if (!name.empty()) {
        devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (!devices.empty()) return devices;
  }
  if (master == "127.0.0.1" || master == "localhost" || master == "::1") {
    devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(master));
  } else {
    devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return devices;
}

}  // namespace

StatusOr<Rendezvous> RendezvousFromEnvironment() {
  Rendezvous r;
  PIPEPLAN_ASSIGN_OR_RETURN(r.rank, ParseEnvInt("RANK", 0));
  PIPEPLAN_ASSIGN_OR_RETURN(r.world_size, ParseEnvInt("WORLD_SIZE", 1));
  PIPEPLAN_ASSIGN_OR_RETURN(r.port, ParseEnvInt("MASTER_PORT", 1));
  const char* host = std::getenv("MASTER_ADDR");
  if (host == nullptr || *host == '\0') return InvalidArgument("MASTER_ADDR is not set");
  r.host = host;
  if (r.rank >= r.world_size) {
    return InvalidArgument("RANK " + std::to_string(r.rank) + " is not below WORLD_SIZE " +
                           std::to_string(r.world_size));
  }
  return r;
}

StatusOr<GlooConnection> ConnectGloo(const Rendezvous& r) {
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size) {
    return InvalidArgument("rank " + std::to_string(r.rank) + " of a world of " +
                           std::to_string(r.world_size));
  }
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(r.port);
    // Under torchrun the agent already hosts the store on MASTER_PORT (torch's own ranks then
    // connect as clients, too); hosting it again only fails to bind, noisily.
    const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    options.isServer =
        r.rank == 0 && !(agent_store != nullptr && std::string_view(agent_store) == "True");
    options.numWorkers = r.world_size;
    options.waitWorkers = true;
    options.timeout = r.timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(r.host, options);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(r.timeout);
    gloo_options->devices = LocalGlooDevices(r.host);
    auto group =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, r.rank, r.world_size, gloo_options);
    GlooConnection connection;
    connection.transport = std::make_unique<GlooTransport>(store, group, r.rank, r.world_size);
    connection.coordinator = std::make_unique<StoreCoordinator>(store, r.rank, r.world_size);
    return connection;
  } catch (const std::exception& e) {
    return Internal("rank " + std::to_string(r.rank) + " could not join the rendezvous at " +
                    r.host + ":" + std::to_string(r.port) + ": " + What(e));
  }
}

}  // namespace pipeplan::torch_ext
