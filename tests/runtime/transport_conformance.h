// The backends the transport conformance suite runs over. Each test executable that links
// transport_conformance_test.cc defines ConformanceBackends() once: the runtime's tests list
// the in-process transport, the torch extension's tests list Gloo.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeplan/runtime/transport.h"

namespace pipeplan::runtime {

using Transports = std::vector<std::unique_ptr<Transport>>;

struct Backend {
  std::string name;
  std::function<Transports(int ranks)> make;  // a connected world of `ranks` transports
  // PendingOp::IsCompleted turns true without a wait (else it may stay false: the default).
  bool tells_completion = false;
};

std::vector<Backend> ConformanceBackends();

}  // namespace pipeplan::runtime
