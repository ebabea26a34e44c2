// Fuzz target: plan files (what 'simulate', 'export' and 'run' read), as binary, text and JSON.
// Whatever parses must round-trip through every format.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pipeplan;
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<Plan> plan = ParsePlan(fuzz::AsText(data, size), format);
    if (plan.ok()) fuzz::CheckRoundTrip<Plan>(*plan, SerializePlan, ParsePlan);
  }
  return 0;
}
