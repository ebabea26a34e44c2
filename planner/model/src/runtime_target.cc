#include "pipeplan/model/runtime_target.h"

namespace pipeplan {

std::string_view RuntimeName(Runtime runtime) {
  switch (runtime) {
    case Runtime::kAny:
      return "any";
    case Runtime::kPipeplanTorch:
      return "pipeplan-torch";
    case Runtime::kTorch:
      return "torch";
    case Runtime::kTorchtitan:
      return "torchtitan";
    case Runtime::kMegatron:
      return "megatron";
  }
  return "any";
}

std::optional<Runtime> RuntimeFromName(std::string_view name) {
  for (const Runtime runtime : {Runtime::kAny, Runtime::kPipeplanTorch, Runtime::kTorch,
                                Runtime::kTorchtitan, Runtime::kMegatron}) {
    if (RuntimeName(runtime) == name) return runtime;
  }
  return std::nullopt;
}

std::string_view RuntimeNames() { return "pipeplan-torch, torch, torchtitan, megatron"; }

bool IsTorchScheduleRuntime(Runtime runtime) {
  switch (runtime) {
    case Runtime::kTorch:
    case Runtime::kTorchtitan:
      return true;
    case Runtime::kAny:
    case Runtime::kPipeplanTorch:
    case Runtime::kMegatron:
      return false;
  }
  return false;
}

}  // namespace pipeplan
