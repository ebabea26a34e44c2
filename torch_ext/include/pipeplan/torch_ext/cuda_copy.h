// Messages between ranks that are threads on one GPU (pipeplan-torch --device cuda:N): the
// in-process transport hands each matched message to this copy, which queues a device-to-device
// cudaMemcpyAsync on torch's current stream of the device. Every rank computes on that same
// stream, so the copy runs after the kernels that wrote the send buffer and before those that
// read the receive buffer, with no host synchronisation; a buffer freed once its send completed
// is reused only by work queued behind the copy. With `shared_device` (the run's one-op-at-a-
// time lock, runtime/execute.h) the copy is queued while holding it, so that it never falls
// between another rank's timing marks.
#pragma once

#include <mutex>

#include "pipeplan/runtime/inproc_transport.h"

namespace pipeplan::torch_ext {

runtime::CopyBytes CudaDeviceCopy(int device, std::mutex* shared_device);

}  // namespace pipeplan::torch_ext
