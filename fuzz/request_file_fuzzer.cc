// Fuzz target: request files ('pipeplan plan --request FILE'), as binary, text and JSON.
// Whatever parses must round-trip; a small enough request is planned and simulated.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pipeplan;
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<PlanRequest> request = ParseRequest(fuzz::AsText(data, size), format);
    if (!request.ok()) continue;
    fuzz::CheckRoundTrip<PlanRequest>(*request, SerializeRequest, ParseRequest);
    fuzz::PlanAndSimulate(*request);
  }
  return 0;
}
