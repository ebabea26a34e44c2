// pipeplan-torch's options: its flags parsed (usage errors, naming the flag) and checked
// against the plan and this machine (input errors: a directory that cannot be written, a GPU
// that is not there, an injected fault outside the run).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/app/flags.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/torch_ext/model_config.h"
#include "pipeplan/torch_ext/optimizer.h"
#include "pipeplan/torch_ext/torch_executor.h"

namespace pipeplan::torch_ext {

enum class TransportKind : uint8_t { kGloo, kInProc, kNccl };

const char* TransportName(TransportKind kind);

struct Options {
  bool profile = false;
  std::string plan_path;
  std::optional<int> local_ranks;
  TransportKind transport = TransportKind::kGloo;
  std::string device = "cpu";  // of an in-process run; over NCCL each rank takes its own GPU
  int gpu = -1;                // N of --device cuda:N, else -1
  bool serial = false;         // in-process ranks take turns (implied on a GPU)
  bool step_barrier = true;    // --no-step-barrier: steps follow each other without a barrier
  bool count_memory = true;    // --no-memory: no allocator counting, no bytes in the timeline
  int steps = 3;
  int warmup = 1;
  double timeout = 60;
  std::optional<std::string> timeline;
  std::optional<std::string> dump_grads;
  std::optional<std::string> dump_params;
  std::optional<std::string> output;
  ModelConfig model;
  std::string stage_modules;
  OptimizerOptions optimizer;
  double clip_grad_norm = 0;
  std::optional<NonfiniteInjection> inject_nonfinite;  // step from 0
  std::optional<std::string> metrics;
  std::optional<std::string> steps_svg;  // --steps-svg: the first measured steps, one picture
  int threads = 1;
  std::optional<runtime::Fault> fault;
};

// The flags of 'run' and 'profile'.
const std::vector<app::FlagSpec>& RunFlags();

// The flags' values; `profile`: the command is 'profile' (more steps, -o required).
StatusOr<Options> ParseOptions(const app::Flags& flags, bool profile);

// What the flags ask of the plan and this machine, before any rank starts.
Status CheckOptionsAgainstPlan(const Plan& plan, const Options& o);

// --timeout, for the store's waits.
std::chrono::milliseconds TimeoutOf(const Options& o);

}  // namespace pipeplan::torch_ext
