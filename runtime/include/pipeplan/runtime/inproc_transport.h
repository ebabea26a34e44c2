// In-process transport: every rank is a thread of this process. A send and the receive it
// matches meet in a bounded per-pair queue; whichever is posted second copies the bytes, so
// nothing is buffered twice and a send completes once its receive has been posted.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

struct InProcOptions {
  // Unmatched operations allowed per ordered rank pair and direction; one more is an error
  // (a plan that never receives what it sends fails loudly instead of growing without bound).
  size_t max_pending_per_pair = 4096;
};

class InProcWorld;

// `ranks` connected transports, index = rank. They share one world: Abort on any of them
// aborts all. Each must be used from one thread at a time (its rank's).
std::vector<std::unique_ptr<Transport>> MakeInProcTransports(int ranks,
                                                             const InProcOptions& options = {});

}  // namespace pipeplan::runtime
