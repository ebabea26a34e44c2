#include "pipeplan/torch_ext/nccl_transport.h"

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

Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::Ok();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

Status NcclStatus(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return Status::Ok();
  return Internal(std::string(call) + ": " + ncclGetErrorString(result));
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
  NcclPendingOp(NcclTransport* transport, std::shared_ptr<Group> group)
      : transport_(transport), group_(std::move(group)) {}
  Status Wait(TimePoint deadline) override;
  TimePoint completed_at() const override { return completed_at_; }

 private:
  NcclTransport* transport_;
  std::shared_ptr<Group> group_;
  TimePoint completed_at_;
};

class NcclTransport final : public runtime::Transport {
 public:
  NcclTransport(int rank, int world_size, int device, ncclComm_t comm, cudaStream_t stream)
      : rank_(rank), world_size_(world_size), device_(device), comm_(comm), stream_(stream) {}

  ~NcclTransport() override {
    cudaSetDevice(device_);
    if (aborted_.load()) {
      ncclCommAbort(comm_);
    } else {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    }
    cudaStreamDestroy(stream_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
  }

  RankId rank() const override { return RankId(rank_); }
  int world_size() const override { return world_size_; }

  StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) override {
    if (std::optional<Status> reason = AbortReason()) return *reason;
    for (const P2POp& op : ops) {
      if (op.peer.value < 0 || op.peer.value >= world_size_) {
        return InvalidArgument("peer " + std::to_string(op.peer.value) + " is outside the " +
                               std::to_string(world_size_) + " ranks");
      }
    }
    PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
    if (ready_ == nullptr) {
      PIPEPLAN_RETURN_IF_ERROR(
          CudaStatus(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate"));
    }
    // Sends read what compute queued before them on the default stream.
    PIPEPLAN_RETURN_IF_ERROR(
        CudaStatus(cudaEventRecord(ready_, cudaStreamLegacy), "cudaEventRecord"));
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
    PIPEPLAN_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(group->done, stream_), "cudaEventRecord"));
    std::vector<std::unique_ptr<PendingOp>> pending;
    pending.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      pending.push_back(std::make_unique<NcclPendingOp>(this, group));
    }
    return pending;
  }

  void Abort(const Status& reason) override {
    {
      const std::lock_guard lock(mutex_);
      if (reason_) return;
      reason_ = reason;
    }
    aborted_.store(true);
    ncclCommAbort(comm_);
  }

  std::optional<Status> AbortReason() const {
    const std::lock_guard lock(mutex_);
    return reason_;
  }

  // An asynchronous NCCL error (a peer vanished, a network failure), if any.
  Status AsyncError() const {
    if (aborted_.load()) return Status::Ok();  // the communicator is gone; the reason says why
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) return Status::Ok();
    if (async == ncclSuccess || async == ncclInProgress) return Status::Ok();
    return NcclStatus(async, "NCCL (asynchronous error)");
  }

  int device() const { return device_; }

 private:
  int rank_;
  int world_size_;
  int device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  cudaEvent_t ready_ = nullptr;
  mutable std::mutex mutex_;
  std::optional<Status> reason_;
  std::atomic<bool> aborted_{false};
};

Status NcclPendingOp::Wait(TimePoint deadline) {
  cudaSetDevice(transport_->device());
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

StatusOr<NcclConnection> ConnectNccl(Coordinator& coordinator, int rank, int world_size, int device,
                                     std::chrono::milliseconds timeout) {
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
  ncclComm_t comm = nullptr;
  PIPEPLAN_RETURN_IF_ERROR(
      NcclStatus(ncclCommInitRank(&comm, world_size, id, rank), "ncclCommInitRank"));
  cudaStream_t stream = nullptr;
  if (const cudaError_t error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      error != cudaSuccess) {
    ncclCommDestroy(comm);
    return CudaStatus(error, "cudaStreamCreateWithFlags");
  }
  return NcclConnection{std::make_unique<NcclTransport>(rank, world_size, device, comm, stream),
                        stream};
}

}  // namespace pipeplan::torch_ext
