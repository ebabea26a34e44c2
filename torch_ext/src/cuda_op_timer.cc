#include "pipeplan/torch_ext/cuda_op_timer.h"

#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/torch_ext/nccl_transport.h"

namespace pipeplan::torch_ext {
namespace {

using runtime::Clock;
using runtime::OpSpan;
using runtime::TimePoint;

Status Cuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::Ok();
  return Internal(std::string(call) + ": " + cudaGetErrorString(error));
}

class CudaEventTimer final : public runtime::OpTimer {
 public:
  CudaEventTimer(int device, cudaStream_t comm_stream)
      : device_(device), comm_stream_(comm_stream) {}

  ~CudaEventTimer() override {
    cudaSetDevice(device_);
    for (cudaEvent_t event : pool_) cudaEventDestroy(event);
  }

  OpClock clock() const override { return OpClock::kCudaEvents; }

  Status BeginStep(size_t actions) override {
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "cudaSetDevice"));
    compute_stream_ =
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
    marks_.assign(actions, Mark{});
    used_ = 0;
    PIPEPLAN_ASSIGN_OR_RETURN(start_, Record(compute_stream_));
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(start_), "cudaEventSynchronize"));
    host_start_ = Clock::now();
    return Status::Ok();
  }

  Status ComputeBegins(size_t index) override {
    Mark& mark = marks_[index];
    mark.thread = kComputeThread;
    PIPEPLAN_ASSIGN_OR_RETURN(mark.begin, Record(compute_stream_));
    return Status::Ok();
  }

  Status ComputeEnded(size_t index) override {
    PIPEPLAN_ASSIGN_OR_RETURN(marks_[index].end, Record(compute_stream_));
    return Status::Ok();
  }

  Status GroupPosting(size_t /*begin*/, size_t /*end*/) override {
    posting_host_ = Clock::now();
    if (comm_stream_ == nullptr) return Status::Ok();
    PIPEPLAN_ASSIGN_OR_RETURN(posting_, Record(comm_stream_));
    return Status::Ok();
  }

  Status GroupPosted(size_t begin, size_t end) override {
    cudaEvent_t posted = nullptr;
    if (comm_stream_ != nullptr) {
      PIPEPLAN_ASSIGN_OR_RETURN(posted, Record(comm_stream_));
    }
    for (size_t i = begin; i < end; ++i) {
      marks_[i] = {kCommThread, posting_, posted, posting_host_, posting_host_};
    }
    return Status::Ok();
  }

  void Landed(size_t index, TimePoint completed) override {
    Mark& mark = marks_[index];
    mark.host_end = std::max(mark.host_begin, completed);
  }

  StatusOr<std::vector<OpSpan>> Resolve() override {
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaSetDevice(device_), "cudaSetDevice"));
    std::vector<OpSpan> spans;
    for (size_t i = 0; i < marks_.size(); ++i) {
      const Mark& mark = marks_[i];
      if (mark.thread < 0) continue;
      OpSpan span{i, mark.host_begin, mark.host_end, mark.thread, false};
      if (mark.begin != nullptr && mark.end != nullptr) {
        PIPEPLAN_ASSIGN_OR_RETURN(span.start, HostTimeOf(mark.begin));
        PIPEPLAN_ASSIGN_OR_RETURN(span.end, HostTimeOf(mark.end));
      }
      spans.push_back(span);
    }
    return spans;
  }

 private:
  struct Mark {
    int thread = -1;  // -1: not marked this step
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    TimePoint host_begin;  // transfers without a comm stream
    TimePoint host_end;
  };

  // An event of the pool, recorded on `stream`. The pool grows to the most marks a step
  // needs and is reused: creating events per op would cost more than the ops it times.
  StatusOr<cudaEvent_t> Record(cudaStream_t stream) {
    if (used_ == pool_.size()) {
      cudaEvent_t event = nullptr;
      PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventCreate(&event), "cudaEventCreate"));
      pool_.push_back(event);
    }
    cudaEvent_t event = pool_[used_++];
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventRecord(event, stream), "cudaEventRecord"));
    return event;
  }

  StatusOr<TimePoint> HostTimeOf(cudaEvent_t event) const {
    PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(event), "cudaEventSynchronize"));
    float ms = 0;
    PIPEPLAN_RETURN_IF_ERROR(
        Cuda(cudaEventElapsedTime(&ms, start_, event), "cudaEventElapsedTime"));
    return runtime::AfterSeconds(host_start_, static_cast<double>(ms) * 1e-3);
  }

  int device_;
  cudaStream_t comm_stream_;
  cudaStream_t compute_stream_ = nullptr;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
  std::vector<Mark> marks_;  // by action index
  cudaEvent_t start_ = nullptr;
  TimePoint host_start_;
  cudaEvent_t posting_ = nullptr;
  TimePoint posting_host_;
};

}  // namespace

StatusOr<std::unique_ptr<runtime::OpTimer>> MakeCudaEventTimer(int device,
                                                               cudaStream_t comm_stream) {
  PIPEPLAN_RETURN_IF_ERROR(CudaDeviceAvailable());
  int count = 0;
  PIPEPLAN_RETURN_IF_ERROR(Cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  if (device < 0 || device >= count) {
    return FailedPrecondition("CUDA device " + std::to_string(device) + " does not exist (" +
                              std::to_string(count) + " visible)");
  }
  return std::unique_ptr<runtime::OpTimer>(std::make_unique<CudaEventTimer>(device, comm_stream));
}

}  // namespace pipeplan::torch_ext
