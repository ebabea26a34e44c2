// The runtime a plan is for (`--runtime`): pipeplan's own, torch's _PipelineScheduleRuntime,
// torchtitan or Megatron-LM. Each executes only some strategies, V and placements, and what it
// cannot run must not be advised (strategies/runtime_support.h says which).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pipeplan {

enum class Runtime : uint8_t {
  kAny,            // no runtime named: every strategy
  kPipeplanTorch,  // pipeplan-torch: every strategy
  kTorch,          // torch.distributed.pipelining's _PipelineScheduleRuntime (_load_csv)
  kTorchtitan,     // torchtitan: torch's runtime, stages placed by its schedule name
  kMegatron,       // Megatron-LM: 1F1B and interleaved 1F1B (with its A2A overlap)
};

// "any", "pipeplan-torch", "torch", "torchtitan", "megatron".
std::string_view RuntimeName(Runtime runtime);
// nullopt for an unknown name.
std::optional<Runtime> RuntimeFromName(std::string_view name);
// "pipeplan-torch, torch, torchtitan, megatron": the names a user may pass.
std::string_view RuntimeNames();

// Whether torch's _PipelineScheduleRuntime executes the plan (torch, torchtitan): it runs an
// F&B cell's halves in turn and keeps what a backward leaves held (the gradient it sent, the
// last stage's outputs) until the step ends, when it clears its stages' state.
bool IsTorchScheduleRuntime(Runtime runtime);

}  // namespace pipeplan
