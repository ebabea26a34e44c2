#include "pipeplan/strategies/runtime_support.h"

#include <algorithm>
#include <array>
#include <string>

namespace pipeplan {
namespace {

// Megatron-LM's pipeline schedules: forward_backward_pipelining_without_interleaving (1F1B),
// ..._with_interleaving (with its microbatch group size), and their combined 1F1B overlap of
// one microbatch's forward with another's backward (expert-parallel all-to-all hidden).
constexpr std::array<std::string_view, 4> kMegatronStrategies = {
    "1f1b", "interleaved-1f1b", "1f1b-overlap", "interleaved-1f1b-overlap"};

Status Refuse(Runtime runtime, std::string_view name, const std::string& why) {
  return InvalidArgument("runtime " + std::string(RuntimeName(runtime)) + " cannot run " +
                         std::string(name) + ": " + why);
}

}  // namespace

Status CheckRunsOn(Runtime runtime, std::string_view name, Placement placement,
                   bool post_validation) {
  switch (runtime) {
    case Runtime::kAny:
    case Runtime::kPipeplanTorch:  // every strategy, dual placement included
      return Status::Ok();
    case Runtime::kTorch:
    case Runtime::kTorchtitan:
      if (placement == Placement::kDual) {
        return Refuse(runtime, name,
                      "torch's schedule has one model copy per stage index, so a dual placement "
                      "(two copies per rank) cannot be loaded; dualpipe-v is the single-copy "
                      "variant torch runs (pipeplan.torch.schedule runs a dualpipe plan made "
                      "without --runtime)");
      }
      if (post_validation) {
        return Refuse(runtime, name,
                      "torch's runtime has no post-validation step (options.post_validation)");
      }
      return Status::Ok();
    case Runtime::kMegatron:
      if (std::find(kMegatronStrategies.begin(), kMegatronStrategies.end(), name) ==
          kMegatronStrategies.end()) {
        return Refuse(runtime, name,
                      "Megatron-LM runs 1f1b, interleaved-1f1b, 1f1b-overlap and "
                      "interleaved-1f1b-overlap");
      }
      if (post_validation) {
        return Refuse(runtime, name, "Megatron-LM has no post-validation step");
      }
      return Status::Ok();
  }
  return Status::Ok();
}

bool RunsCellsInTurn(Runtime runtime) { return IsTorchScheduleRuntime(runtime); }

}  // namespace pipeplan
