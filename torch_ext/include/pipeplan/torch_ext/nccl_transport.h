// The GPU transport: point-to-point messages over NCCL (the library torch itself loads), on a
// dedicated comm stream, each Post one ncclGroupStart/End. The communicator is bootstrapped
// through the rendezvous store (rank 0 puts ncclGetUniqueId's bytes there). Buffers are
// device memory on the rank's GPU and must stay alive until their op completes.
//
// Written against NCCL 2.x and the CUDA runtime; built and its CPU-side checks tested here,
// but it has not yet run on a GPU (no GPU was lent to this project so far): see
// docs/torch.md before relying on it.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>

#include "pipeplan/runtime/coordinator.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::torch_ext {

// Ok when a CUDA device can be used by this process; otherwise why not ("no CUDA device:
// cudaGetDeviceCount says ...").
Status CudaDeviceAvailable();

// Creates the communicator of rank `rank` of `world_size` on CUDA device `device` (every rank
// must call it). The communicator is non-blocking: set-up, and every later NCCL call, fails
// after `timeout` instead of hanging (a missing peer). A device this process cannot see is
// refused, naming how many it sees. `coordinator` must outlive the transport.
//
// Ordering: before each group the comm stream waits for what torch's current stream holds,
// so a send reads finished data; Wait on a receive makes the current stream wait for the
// group on the device, and returns once it completed (the host's view, for timing).
// Buffers stay valid until their op completed: the executor keeps them until EndStep, which
// runs after every transfer was waited, so the caching allocator cannot hand their memory out
// while NCCL uses it (hence no recordStream).
// Abort publishes the reason in the store and aborts the communicator once (a second Abort,
// and the destructor, leave it alone); every rank's watcher polls the store and aborts with
// the first reason, so all ranks stop at once with the failing rank's diagnosis.
// NCCL cannot tell a receive of the wrong size (the sizes match by construction: the plan's
// validation and the executor's fixed activation shapes).
struct NcclConnection {
  std::unique_ptr<runtime::Transport> transport;
  cudaStream_t comm_stream = nullptr;  // where its transfers run (owned by the transport)
};
StatusOr<NcclConnection> ConnectNccl(runtime::Coordinator& coordinator, int rank, int world_size,
                                     int device, std::chrono::milliseconds timeout);

}  // namespace pipeplan::torch_ext
