#include "pipeplan/runtime/inproc_transport.h"
#include "transport_conformance.h"

namespace pipeplan::runtime {

std::vector<Backend> ConformanceBackends() {
  return {{.name = "inproc",
           .make = [](int ranks) { return MakeInProcTransports(ranks); },
           .tells_completion = true}};
}

}  // namespace pipeplan::runtime
