// CUDA-event op timing: how long a GPU op's kernels ran, not how long their launch took (CUDA
// is asynchronous; the host clock around Run would measure launches).
//
// Events with timing enabled are recorded on torch's current stream of the device around each
// compute op and, given the transport's comm stream, around each transfer group; nothing
// synchronises per op. BeginStep drains the compute stream once and records the step's start
// event, noting the host time when it completed; Resolve waits for the step's events and maps
// each onto the host clock as that time plus its elapsed time from the start event. Without a
// comm stream (a transport that copies through the host), transfers keep the host clock: from
// their post until the transport saw them complete. Not thread-safe: one rank's step thread.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "pipeplan/model/status.h"
#include "pipeplan/runtime/op_timer.h"

namespace pipeplan::torch_ext {

// A timer for CUDA device `device`; fails naming why when that device cannot be used.
StatusOr<std::unique_ptr<runtime::OpTimer>> MakeCudaEventTimer(int device,
                                                               cudaStream_t comm_stream = nullptr);

}  // namespace pipeplan::torch_ext
