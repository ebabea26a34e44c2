// Fuzz target: profile files ('pipeplan profile' writes them, 'pipeplan calibrate' reads
// them), as binary, text and JSON. Whatever parses must round-trip, and what Calibrate makes
// of it must be a valid cost model, per stage and uniform (calibrate.h promises both).
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pipeplan;
  for (const ProtoFormat format : fuzz::kProtoFormats) {
    const StatusOr<Profile> profile = ParseProfile(fuzz::AsText(data, size), format);
    if (!profile.ok()) continue;
    fuzz::CheckRoundTrip<Profile>(*profile, SerializeProfile, ParseProfile);
    for (const bool uniform : {false, true}) {
      CalibrateOptions options;
      options.uniform = uniform;
      const StatusOr<CostModel> costs = Calibrate(*profile, options);
      if (!costs.ok()) continue;
      PIPEPLAN_FUZZ_CHECK_OK(ValidateCostModel(*costs, static_cast<int>(profile->stages.size())));
    }
  }
  return 0;
}
