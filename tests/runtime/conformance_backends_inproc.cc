#include "pipeplan/runtime/inproc_transport.h"
#include "transport_conformance.h"

namespace pipeplan::runtime {

std::vector<Backend> ConformanceBackends() {
  return {{"inproc", [](int ranks) { return MakeInProcTransports(ranks); }}};
}

}  // namespace pipeplan::runtime
