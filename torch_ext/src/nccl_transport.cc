#include "pipeplan/torch_ext/nccl_transport.h"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pipeplan::torch_ext {
namespace {

using runtime::Clock;
using runtime::P2PKind;
using runtime::P2POp;
using runtime::PendingOp;
using runtime::TimePoint;

constexpr char kUniqueIdKey[] = "pipeplan/nccl-unique-id";
constexpr auto kPoll = std::chrono::microseconds(50);
constexpr auto kAbortPoll = std::chrono::milliseconds(20);
constexpr auto kFinalizeLimit = std::chrono::seconds(10);

Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::Ok();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

Status NcclStatus(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return Status::Ok();
  return Internal(std::string(call) + ": " + ncclGetErrorString(result));
}

// The communicator is non-blocking (ncclCommInitRankConfig, blocking = 0): a call may return
// ncclInProgress and finish in the background. Polls its state until it has, `give_up` says
// to stop (an abort) or `deadline` passes; so no NCCL call can hang the rank.
template <typename GiveUp>
Status AwaitComm(ncclComm_t comm, TimePoint deadline, const char* what, GiveUp give_up) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    PIPEPLAN_RETURN_IF_ERROR(
        NcclStatus(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError"));
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) return NcclStatus(state, what);
    if (std::optional<Status> reason = give_up()) return *reason;
    if (Clock::now() >= deadline) {
      return DeadlineExceeded(std::string(what) + " did not complete in time");
    }
    std::this_thread::sleep_for(kPoll);
  }
}

// torch's current stream on `device`: where LibTorch queues the executor's kernels.
cudaStream_t ComputeStream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

// The completion of one posted group, shared by its ops.
struct Group {
  cudaEvent_t done = nullptr;
  ~Group() {
    if (done != nullptr) cudaEventDestroy(done);
  }
};

class NcclTransport;

class NcclPendingOp final : public PendingOp {
 public:
  NcclPendingOp(NcclTransport* transport, std::shared_ptr<Group> group, bool receive)
      : transport_(transport), group_(std::move(group)), receive_(receive) {}
  Status Wait(TimePoint deadline) override;
  // The group's event has fired, or failed (Wait then reports the error).
  bool IsCompleted() override { return cudaEventQuery(group_->done) != cudaErrorNotReady; }
  TimePoint completed_at() const override { return completed_at_; }

 private:
  NcclTransport* transport_;
  std::shared_ptr<Group> group_;
  bool receive_;
  bool ordered_ = false;  // the compute stream waits for the receive
  TimePoint completed_at_;
};

class NcclTransport final : public runtime::Transport {
 public:
  NcclTransport(int rank, int world_size, int device, ncclComm_t comm, cudaStream_t stream,
                runtime::Coordinator& coordinator, std::chrono::milliseconds timeout)
      : rank_(rank),
        world_size_(world_size),
        device_(device),
        timeout_(timeout),
        comm_(comm),
        stream_(stream),
        coordinator_(coordinator),
        watcher_([this](const std::stop_token& stop) { WatchForAbort(stop); }) {}

  ~NcclTransport() override {
    watcher_.request_stop();
    watcher_.join();
    cudaSetDevice(device_);
    const std::lock_guard lock(comm_mutex_);
    if (comm_ != nullptr) Release();
    cudaStreamDestroy(stream_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
  }

  RankId rank() const override { return RankId(rank_); }
  int world_size() const override { return world_size_; }

  StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) override {
    for (const P2POp& op : ops) {
      if (op.peer.value < 0 || op.peer.value >= world_size_) {
        return InvalidArgument("peer " + std::to_string(op.peer.value) + " is outside the " +
                               std::to_string(world_size_) + " ranks");
      }
    }
    // Held while NCCL uses the communicator, so that an abort from the watchdog or the watcher
    // cannot free it under us (the calls do not block: the communicator is non-blocking).
    const std::lock_guard lock(comm_mutex_);
    if (std::optional<Status> reason = AbortReason()) return *reason;
    PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    if (ready_ == nullptr) {
      PIPEPLAN_RETURN_IF_ERROR(
          CudaStatus(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate"));
    }
    // Sends read what the executor queued before them on torch's current stream (not the
    // legacy default stream, which a torch stream guard would bypass).
    PIPEPLAN_RETURN_IF_ERROR(
        CudaStatus(cudaEventRecord(ready_, ComputeStream(device_)), "cudaEventRecord"));
    PIPEPLAN_RETURN_IF_ERROR(
        CudaStatus(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent"));
    auto group = std::make_shared<Group>();
    PIPEPLAN_RETURN_IF_ERROR(CudaStatus(
        cudaEventCreateWithFlags(&group->done, cudaEventDisableTiming), "cudaEventCreate"));
    PIPEPLAN_RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
    Status posted = Status::Ok();
    for (const P2POp& op : ops) {
      const ncclResult_t result = op.kind == P2PKind::kSend
                                      ? ncclSend(op.buffer.data(), op.buffer.size(), ncclUint8,
                                                 op.peer.value, comm_, stream_)
                                      : ncclRecv(op.buffer.data(), op.buffer.size(), ncclUint8,
                                                 op.peer.value, comm_, stream_);
      if (posted.ok())
        posted = NcclStatus(result, op.kind == P2PKind::kSend ? "ncclSend" : "ncclRecv");
    }
    const Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    PIPEPLAN_RETURN_IF_ERROR(posted);
    PIPEPLAN_RETURN_IF_ERROR(ended);
    // A non-blocking group may still be enqueueing (connecting to a peer the first time): the
    // stream holds its work only once the communicator says so.
    PIPEPLAN_RETURN_IF_ERROR(AwaitComm(comm_, Clock::now() + timeout_, "ncclGroupEnd",
                                       [this] { return AbortReason(); }));
    PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(group->done, stream_), "cudaEventRecord"));
    std::vector<std::unique_ptr<PendingOp>> pending;
    pending.reserve(ops.size());
    for (const P2POp& op : ops) {
      pending.push_back(std::make_unique<NcclPendingOp>(this, group, op.kind == P2PKind::kRecv));
    }
    return pending;
  }

  // Publishes the reason for every rank (the watchers of the others abort with it, so they
  // stop at once instead of waiting out their timeout), then aborts here.
  void Abort(const Status& reason) override { AbortLocally(coordinator_.PublishAbort(reason)); }

  std::optional<Status> AbortReason() const {
    const std::lock_guard lock(mutex_);
    return reason_;
  }

  // An asynchronous NCCL error (a peer vanished, a network failure), if any.
  Status AsyncError() {
    const std::lock_guard lock(comm_mutex_);
    if (comm_ == nullptr) return Status::Ok();  // aborted: the reason says why
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) return Status::Ok();
    if (async == ncclSuccess || async == ncclInProgress) return Status::Ok();
    return NcclStatus(async, "NCCL (asynchronous error)");
  }

  int device() const { return device_; }

 private:
  // Once, whoever comes first (the step's failure, the watchdog, the watcher): the reason is
  // kept, and the communicator aborted and forgotten, so that neither a second Abort nor the
  // destructor touches it again (ncclCommAbort twice on one communicator is undefined).
  void AbortLocally(const Status& reason) {
    {
      const std::lock_guard lock(mutex_);
      if (reason_) return;
      reason_ = Status(StatusCode::kAborted, reason.message());
    }
    const std::lock_guard lock(comm_mutex_);
    if (comm_ == nullptr) return;
    cudaSetDevice(device_);
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  void WatchForAbort(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(kAbortPoll);
      if (std::optional<Status> reason = coordinator_.PublishedAbort()) {
        AbortLocally(*reason);
        return;
      }
    }
  }

  // A healthy shutdown: pending work flushed (bounded), then destroyed; aborted if it hangs.
  void Release() {
    cudaStreamSynchronize(stream_);
    const ncclResult_t finalize = ncclCommFinalize(comm_);
    const bool finalized = finalize == ncclSuccess || finalize == ncclInProgress;
    const Status flushed = finalized
                               ? AwaitComm(comm_, Clock::now() + kFinalizeLimit, "ncclCommFinalize",
                                           [] { return std::optional<Status>(); })
                               : Internal("ncclCommFinalize failed");
    if (flushed.ok()) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }

  int rank_;
  int world_size_;
  int device_;
  std::chrono::milliseconds timeout_;
  std::mutex comm_mutex_;  // guards comm_ (freed by an abort) while NCCL uses it
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t ready_ = nullptr;
  runtime::Coordinator& coordinator_;
  mutable std::mutex mutex_;
  std::optional<Status> reason_;
  std::jthread watcher_;  // last: started once everything it reads exists
};

Status NcclPendingOp::Wait(TimePoint deadline) {
  cudaSetDevice(transport_->device());
  if (receive_ && !ordered_) {
    // The consumer's kernels queue behind the receive on the device, whatever the host does;
    // the host still waits below, to report when it landed (the timeline's transfer end).
    PIPEPLAN_RETURN_IF_ERROR(
        CudaStatus(cudaStreamWaitEvent(ComputeStream(transport_->device()), group_->done, 0),
                   "cudaStreamWaitEvent"));
    ordered_ = true;
  }
  while (true) {
    if (std::optional<Status> reason = transport_->AbortReason()) return *reason;
    const cudaError_t state = cudaEventQuery(group_->done);
    if (state == cudaSuccess) {
      completed_at_ = Clock::now();
      return Status::Ok();
    }
    if (state != cudaErrorNotReady) return CudaStatus(state, "cudaEventQuery");
    PIPEPLAN_RETURN_IF_ERROR(transport_->AsyncError());
    if (Clock::now() >= deadline) return DeadlineExceeded("NCCL transfer did not complete in time");
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace

Status CudaDeviceAvailable() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return FailedPrecondition(std::string("no CUDA device: cudaGetDeviceCount says ") +
                              cudaGetErrorString(error));
  }
  if (count == 0) return FailedPrecondition("no CUDA device: cudaGetDeviceCount says 0");
  return Status::Ok();
}

StatusOr<NcclConnection> ConnectNccl(runtime::Coordinator& coordinator, int rank, int world_size,
                                     int device, std::chrono::milliseconds timeout) {
  PIPEPLAN_RETURN_IF_ERROR(CudaDeviceAvailable());
  int count = 0;
  PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (device < 0 || device >= count) {
    // LOCAL_RANK picks the device: more local ranks than GPUs would otherwise fail inside NCCL.
    return FailedPrecondition("CUDA device " + std::to_string(device) + " does not exist: this " +
                              "process sees " + std::to_string(count) +
                              " (CUDA_VISIBLE_DEVICES, or more local ranks than GPUs)");
  }
  PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  ncclUniqueId id;
  if (rank == 0) {
    PIPEPLAN_RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    PIPEPLAN_RETURN_IF_ERROR(
        coordinator.Put(kUniqueIdKey, std::string(id.internal, sizeof id.internal)));
  } else {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes, coordinator.Get(kUniqueIdKey, timeout));
    if (bytes.size() != sizeof id.internal) {
      return Internal("the NCCL unique id in the store has " + std::to_string(bytes.size()) +
                      " bytes, not " + std::to_string(sizeof id.internal));
    }
    std::copy(bytes.begin(), bytes.end(), id.internal);
  }
  // Non-blocking, so that a rank whose peers never come fails after the timeout instead of
  // hanging in ncclCommInitRank.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  PIPEPLAN_RETURN_IF_ERROR(NcclStatus(ncclCommInitRankConfig(&comm, world_size, id, rank, &config),
                                      "ncclCommInitRankConfig"));
  if (Status ready = AwaitComm(comm, Clock::now() + timeout, "NCCL communicator set-up",
                               [] { return std::optional<Status>(); });
      !ready.ok()) {
    ncclCommAbort(comm);
    return ready.WithContext("rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                             " (are all ranks up?)");
  }
  cudaStream_t stream = nullptr;
  if (const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      error != cudaSuccess) {
    ncclCommAbort(comm);
    return CudaStatus(error, "cudaStreamCreateWithFlags");
  }
  return NcclConnection{
      std::make_unique<NcclTransport>(rank, world_size, device, comm, stream, coordinator, timeout),
      stream};
}

}  // namespace pipeplan::torch_ext
