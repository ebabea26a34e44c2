// In-process transport: every rank is a thread of this process. A send and the receive it
// matches meet in a per-pair queue; whichever is posted second copies the bytes, so nothing is
// buffered twice and a send completes once its receive has been posted. Abort empties the
// queues: no operation posted before it is matched after it.
#pragma once

#include <memory>
#include <vector>

#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

class InProcWorld;

// `ranks` connected transports, index = rank. They share one world: Abort on any of them
// aborts all. Each must be used from one thread at a time (its rank's).
std::vector<std::unique_ptr<Transport>> MakeInProcTransports(int ranks);

}  // namespace pipeplan::runtime
