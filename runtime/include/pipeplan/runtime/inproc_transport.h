// In-process transport: every rank is a thread of this process. A send and the receive it
// matches meet in a per-pair queue; whichever is posted second copies the bytes, so nothing is
// buffered twice and a send completes once its receive has been posted. Abort empties the
// queues: no operation posted before it is matched after it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

class InProcWorld;

// Moves a matched message's bytes (`to` and `from` are the same size). Called on the thread
// that posted second, under the pair's lock; an error fails both ends. The default is memcpy:
// host memory. Ranks whose buffers live on a device give a copy that the device orders (a
// CUDA copy on the stream their compute uses: torch_ext/cuda_copy.h).
using CopyBytes = std::function<Status(std::span<std::byte> to, std::span<const std::byte> from)>;

// `ranks` connected transports, index = rank. They share one world: Abort on any of them
// aborts all. Each must be used from one thread at a time (its rank's).
std::vector<std::unique_ptr<Transport>> MakeInProcTransports(int ranks, CopyBytes copy = {});

}  // namespace pipeplan::runtime
