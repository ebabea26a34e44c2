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

#include "pipeplan/runtime/transport.h"
#include "pipeplan/torch_ext/gloo_transport.h"

namespace pipeplan::torch_ext {

// Ok when a CUDA device can be used by this process; otherwise why not ("no CUDA device:
// cudaGetDeviceCount says ...").
Status CudaDeviceAvailable();

// Creates the communicator of rank `rank` of `world_size` on CUDA device `device` (every rank
// must call it; it blocks until all have, or fails after `timeout`). A device this process
// cannot see is refused, naming how many it sees.
//
// Ordering: before each group the comm stream waits for work already queued on the legacy
// default stream (where LibTorch runs unless told otherwise), so a send reads finished data;
// a receive's consumer runs after Wait, which returns once the group's event completed.
// NCCL cannot tell a receive of the wrong size (the sizes must match by construction: the
// plan's validation and the executor's fixed activation shapes); Abort calls ncclCommAbort,
// and the other ranks' watchdogs end their steps within the timeout.
struct NcclConnection {
  std::unique_ptr<runtime::Transport> transport;
  cudaStream_t comm_stream = nullptr;  // where its transfers run (owned by the transport)
};
StatusOr<NcclConnection> ConnectNccl(Coordinator& coordinator, int rank, int world_size, int device,
                                     std::chrono::milliseconds timeout);

}  // namespace pipeplan::torch_ext
