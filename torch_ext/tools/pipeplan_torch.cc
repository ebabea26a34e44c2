// pipeplan-torch: runs pipeplan plans on the built-in transformer with LibTorch, every op
// timed. 'run' executes and writes the measured timeline (and, on request, the gradients of
// the first step); 'profile' does the same and writes a Profile for 'pipeplan calibrate'.
// Ranks are processes (Gloo via c10d; torchrun, or --local-ranks P to spawn them) or threads
// of this process (--transport inproc).
#include <ATen/Parallel.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/measurement/build_profile.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/rank_run.h"
#include "pipeplan/simulation/measured_timeline.h"
#include "pipeplan/simulation/timeline_metrics.h"
#include "pipeplan/torch_ext/backward_reference.h"
#include "pipeplan/torch_ext/cuda_copy.h"
#include "pipeplan/torch_ext/cuda_op_timer.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/nccl_transport.h"
#include "pipeplan/torch_ext/stage_dump.h"
#include "pipeplan/torch_ext/torch_executor.h"

extern char** environ;

namespace pipeplan::torch_ext {
namespace {

using app::FlagKind;
using app::Flags;
using app::FlagSpec;

constexpr std::string_view kHelp =
    R"(usage: pipeplan-torch run PLAN [options]
       pipeplan-torch profile PLAN -o PROFILE [options]
       torchrun --no-python --nproc-per-node P pipeplan-torch run PLAN [options]

Runs a pipeplan plan on the built-in model (pre-norm transformer blocks, attention + MLP,
synthetic data, mean-squared-error loss on the last stage), or on your TorchScript stages
(--stage-modules), with LibTorch, timing every op.
F keeps the autograd graph, B is the full backward, I takes input gradients only and W runs
the deferred weight GEMMs, F&B overlap cells run their halves in turn (CPU), and the
optimizer steps after the last W. Ranks are separate processes talking over Gloo (c10d):
launched by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, outside torchrun,
spawned here on 127.0.0.1 (the plan's P ranks, or --local-ranks P); or threads of this process
with --transport inproc, on the CPU or all on one GPU (--device cuda:N).

'profile' runs the same way and writes the measured F/B/I/W/overlap durations and transfer
times per stage (medians and spread) for 'pipeplan calibrate PROFILE -o COSTS'.

Options:
  PLAN, --plan FILE       the plan (from 'pipeplan plan'); required, given either way
  --local-ranks P         spawn the plan's P ranks as processes of this machine (what
                          happens anyway outside torchrun, when RANK is not set)
  --transport NAME        gloo (processes; default), nccl (processes, one GPU each:
                          cuda:LOCAL_RANK; run on one GPU, not yet between two: see
                          docs/gpu.md) or inproc (threads of this process)
  --device DEV            inproc only: cpu (default) or cuda:N. cuda:N runs every rank as a
                          thread on that one GPU, one op at a time (--serial is implied:
                          ops of different ranks never share the GPU, so each op's time is
                          its own, as on one GPU per rank: the costs the simulator wants),
                          timed by CUDA events; the step is then the sum of every rank's
                          work, not a P-GPU step. Each rank's memory is what changes in
                          its own turns (the ranks share the device's allocator)
  --serial                inproc only: the ranks take turns, one op at a time, so that ops
                          do not contend for the cores (uncontended op costs on a machine
                          with fewer cores than ranks); the step is then serial
  --steps N               measured steps (default 3; profile: 5)
  --warmup K              steps run first and not measured (default 1; profile: 2)
  --timeout SEC           a rank with no progress for this long fails the step, and a
                          rendezvous that does not complete in it fails the run (default 60)
  --timeline FILE         write the median measured step (with the plan; times in
                          microseconds) for 'pipeplan diff' and 'pipeplan profile'
  --dump-grads DIR        write each stage's gradients of the first step, before the
                          optimizer uses them (and the loss), as DIR/stage-S.pt
  --dump-params DIR       write each stage's parameters and optimizer state before the
                          first step and after every step, as DIR/step-N/stage-S.pt
                          (both: torch.load reads them; see docs/torch.md)
  -o, --output FILE       profile: where the Profile goes (.json, .pb or text)
  --layers-per-stage N    transformer blocks per stage (default 2)
  --hidden N              hidden size (default 64)
  --heads N               attention heads (default 4; must divide --hidden)
  --sequence N            tokens per sample (default 16)
  --microbatch-size N     samples per microbatch (default 2)
  --seed N                parameters and data are drawn from it (default 1)
  --stage-modules DIR     run the user's TorchScript modules DIR/stage-S.pt (one per
                          stage; forward(x) -> y) instead of the built-in blocks; the data
                          and every message between stages are [microbatch-size,
                          sequence, hidden] (the flags above), the loss is MSE on the last
                          stage's output; I and W split by cutting the graph where the
                          weights' chains leave the input's (I + W = B's work), see
                          docs/torch.md
  --optimizer NAME        sgd (default) or adamw
  --lr X                  learning rate (default 0.001)
  --clip-grad-norm X      clip the gradients to the global L2 norm X (over every stage, as
                          torch.nn.utils.clip_grad_norm_): each step ends with every
                          rank's gradient state exchanged, and a step whose gradients are
                          not finite is skipped on every rank (default: no clipping). A
                          plan with post-validation (plan --post-validation) updates
                          speculatively instead: the next step's PV judges the update, and
                          one that had to clip or skip is undone exactly and redone, the
                          forwards run on it replayed
  --metrics FILE          write per step and rank (warm-up included) the loss, the global
                          gradient norm, whether the step clipped or was skipped and, with
                          post-validation, rolled back and how many forwards it replayed,
                          as JSON Lines
  --inject-nonfinite S:K  testing aid: stage K's gradients become NaN in step S (from 1,
                          warm-up steps included); the step is then skipped
  --threads N             intra-op threads per process (default 1)
  --inject-fault F        testing aid: KIND@RANK:ACTION[:STEP], KIND fail, throw, stall or
                          crash (the process exits at once, as a dying peer would) on a
                          compute action, or truncate (a malformed message) on a send
  -h, --help              show this help

Exit code 0 on success, 1 when a rank fails (its error names the rank and the action; the
other ranks stop with an error within --timeout), 2 for a usage error.
)";

constexpr double kMicroseconds = 1e-6;  // the timelines' unit

enum class TransportKind : uint8_t { kGloo, kInProc, kNccl };

const char* TransportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kGloo:
      return "gloo";
    case TransportKind::kInProc:
      return "inproc";
    case TransportKind::kNccl:
      return "nccl";
  }
  return "?";
}

struct Options {
  bool profile = false;
  std::string plan_path;
  std::optional<int> local_ranks;
  TransportKind transport = TransportKind::kGloo;
  std::string device = "cpu";  // of an in-process run; over NCCL each rank takes its own GPU
  int gpu = -1;                // N of --device cuda:N, else -1
  bool serial = false;         // in-process ranks take turns (implied on a GPU)
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
  int threads = 1;
  std::optional<runtime::Fault> fault;
};

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec> specs = {{"plan"},
                                              {"local-ranks"},
                                              {"transport"},
                                              {"device"},
                                              {"serial", FlagKind::kBool},
                                              {"steps"},
                                              {"warmup"},
                                              {"timeout"},
                                              {"timeline"},
                                              {"dump-grads"},
                                              {"dump-params"},
                                              {"output", FlagKind::kValue, 'o'},
                                              {"layers-per-stage"},
                                              {"hidden"},
                                              {"heads"},
                                              {"sequence"},
                                              {"microbatch-size"},
                                              {"seed"},
                                              {"stage-modules"},
                                              {"optimizer"},
                                              {"lr"},
                                              {"threads"},
                                              {"clip-grad-norm"},
                                              {"metrics"},
                                              {"inject-nonfinite"},
                                              {"inject-fault"}};
  return specs;
}

// The plan, given as the first argument (as 'pipeplan run' takes it) or with --plan.
StatusOr<std::string> PlanPath(const Flags& flags) {
  const std::vector<std::string>& positional = flags.positional();
  const std::optional<std::string> flag = flags.GetString("plan");
  if (positional.size() > 1 || (!positional.empty() && flag)) {
    return InvalidArgument("unexpected argument '" + positional.back() +
                           "' (the plan is given once: PLAN or --plan PLAN)");
  }
  if (!positional.empty()) return positional.front();
  if (flag) return *flag;
  return InvalidArgument("missing the plan (pipeplan-torch run PLAN, or --plan PLAN)");
}

// "--clip-grad-norm X": a finite number above 0.
StatusOr<double> ParseClipNorm(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value <= 0) {
    return InvalidArgument("--clip-grad-norm: '" + text +
                           "' is not a finite number greater than 0");
  }
  return value;
}

// "--inject-nonfinite STEP:STAGE", STEP from 1 (the plan's bounds are checked later).
StatusOr<NonfiniteInjection> ParseNonfiniteInjection(const std::string& text) {
  int step = 0;
  int stage = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%d:%d%n", &step, &stage, &consumed) != 2 ||
      consumed != static_cast<int>(text.size()) || step < 1 || stage < 0) {
    return InvalidArgument("--inject-nonfinite: '" + text +
                           "' is not STEP:STAGE (STEP from 1, STAGE from 0)");
  }
  return NonfiniteInjection{.step = step - 1, .stage = stage};
}

// "--device cpu|cuda:N" and "--serial": in-process runs only; a GPU implies the in-process
// transport (when none is named) and turns.
Status ParseDevice(const Flags& flags, Options& o) {
  const std::optional<std::string> device = flags.GetString("device");
  o.serial = flags.GetBool("serial");
  if (device) {
    int index = -1;
    int consumed = 0;
    const bool cuda = std::sscanf(device->c_str(), "cuda:%d%n", &index, &consumed) == 1 &&
                      consumed == static_cast<int>(device->size()) && index >= 0;
    if (*device != "cpu" && !cuda) {
      return InvalidArgument("--device: '" + *device + "' is not cpu or cuda:N (N from 0)");
    }
    if (cuda && !flags.Has("transport")) o.transport = TransportKind::kInProc;
    o.device = *device;
    o.gpu = cuda ? index : -1;
    o.serial = o.serial || cuda;
  }
  if ((device || o.serial) && o.transport != TransportKind::kInProc) {
    return InvalidArgument(
        std::string(device ? "--device" : "--serial") +
        ": for ranks that are threads of this process (--transport inproc); over gloo every "
        "rank is a CPU process, over nccl rank r takes cuda:LOCAL_RANK");
  }
  return Status::Ok();
}

StatusOr<Options> ParseOptions(const Flags& flags, bool profile) {
  Options o;
  o.profile = profile;
  if (profile) {
    o.steps = 5;
    o.warmup = 2;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(o.plan_path, PlanPath(flags));
  PIPEPLAN_ASSIGN_OR_RETURN(o.local_ranks, flags.GetInt("local-ranks", 1));
  if (auto transport = flags.GetString("transport")) {
    if (*transport == "gloo") {
      o.transport = TransportKind::kGloo;
    } else if (*transport == "inproc") {
      o.transport = TransportKind::kInProc;
    } else if (*transport == "nccl") {
      o.transport = TransportKind::kNccl;
    } else {
      return InvalidArgument("--transport: unknown transport '" + *transport +
                             "' (expected gloo, nccl or inproc)");
    }
  }
  PIPEPLAN_RETURN_IF_ERROR(ParseDevice(flags, o));
  const auto int_flag = [&](std::string_view name, int min, int& target) -> Status {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> value, flags.GetInt(name, min));
    if (value) target = *value;
    return Status::Ok();
  };
  PIPEPLAN_RETURN_IF_ERROR(int_flag("steps", 1, o.steps));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("warmup", 0, o.warmup));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("layers-per-stage", 1, o.model.layers_per_stage));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("hidden", 1, o.model.hidden));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("heads", 1, o.model.heads));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("sequence", 1, o.model.sequence));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("microbatch-size", 1, o.model.microbatch_size));
  PIPEPLAN_RETURN_IF_ERROR(int_flag("threads", 1, o.threads));
  int seed = 1;
  PIPEPLAN_RETURN_IF_ERROR(int_flag("seed", 0, seed));
  o.model.seed = static_cast<uint64_t>(seed);
  PIPEPLAN_RETURN_IF_ERROR(ValidateModelConfig(o.model));
  if (auto dir = flags.GetString("stage-modules")) {
    if (!std::filesystem::is_directory(*dir)) {
      return InvalidArgument("--stage-modules: '" + *dir + "' is not a directory");
    }
    o.stage_modules = *dir;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> timeout,
                            flags.GetNonNegativeDouble("timeout"));
  if (timeout) {
    if (*timeout <= 0) return InvalidArgument("--timeout must be positive");
    o.timeout = *timeout;
  }
  if (auto optimizer = flags.GetString("optimizer")) {
    PIPEPLAN_ASSIGN_OR_RETURN(o.optimizer.kind, ParseOptimizerKind(*optimizer));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> lr, flags.GetNonNegativeDouble("lr"));
  if (lr) o.optimizer.learning_rate = *lr;
  if (auto clip = flags.GetString("clip-grad-norm")) {
    PIPEPLAN_ASSIGN_OR_RETURN(o.clip_grad_norm, ParseClipNorm(*clip));
  }
  if (auto injection = flags.GetString("inject-nonfinite")) {
    PIPEPLAN_ASSIGN_OR_RETURN(o.inject_nonfinite, ParseNonfiniteInjection(*injection));
  }
  o.metrics = flags.GetString("metrics");
  o.timeline = flags.GetString("timeline");
  o.dump_grads = flags.GetString("dump-grads");
  o.dump_params = flags.GetString("dump-params");
  o.output = flags.GetString("output");
  if (profile && !o.output) return InvalidArgument("profile needs -o PROFILE");
  if (!profile && o.output) return InvalidArgument("-o is for 'profile'; 'run' writes --timeline");
  if (auto fault = flags.GetString("inject-fault")) {
    StatusOr<runtime::Fault> parsed = runtime::ParseFault(*fault);
    if (!parsed.ok()) return parsed.status().WithContext("--inject-fault");
    o.fault = *parsed;
  }
  return o;
}

// ---- what every rank does --------------------------------------------------------------

NamedTensors Named(const std::vector<std::string>& names, const std::vector<at::Tensor>& tensors) {
  NamedTensors named;
  for (size_t i = 0; i < names.size() && i < tensors.size(); ++i) {
    named.emplace_back(names[i], tensors[i]);
  }
  return named;
}

Status DumpGradients(const std::string& dir, int step, double loss,
                     const std::vector<StageGradients>& stages) {
  for (const StageGradients& stage : stages) {
    PIPEPLAN_RETURN_IF_ERROR(app::WriteFileAtomic(
        GradientDumpPath(dir, stage.stage),
        EncodeGradientDump(stage.stage, step, loss, Named(*stage.names, stage.grads)),
        /*create_parents=*/true));
  }
  return Status::Ok();
}

Status DumpParameters(const std::string& dir, int step,
                      const std::vector<StageParameters>& stages) {
  for (const StageParameters& stage : stages) {
    PIPEPLAN_RETURN_IF_ERROR(app::WriteFileAtomic(
        ParameterDumpPath(dir, step, stage.stage),
        EncodeParameterDump(stage.stage, step, Named(*stage.names, stage.params),
                            stage.optimizer_state, stage.optimizer_step),
        /*create_parents=*/true));
  }
  return Status::Ok();
}

// A rank's executor as the runtime drives it (with the fault injector around it when asked),
// and the torch executor inside, for its step records.
struct RankExecutor {
  std::unique_ptr<runtime::OpExecutor> executor;
  const TorchExecutor* torch = nullptr;
};

StatusOr<RankExecutor> MakeExecutor(const Plan& plan, RankId rank, const Options& o,
                                    const std::string& device, bool memory_in_turns = false) {
  TorchExecutorOptions options;
  options.device = device;
  options.memory_in_turns = memory_in_turns;
  options.model = o.model;
  options.stage_modules = o.stage_modules;
  options.optimizer = o.optimizer;
  options.clip_grad_norm = o.clip_grad_norm;
  options.inject_nonfinite = o.inject_nonfinite;
  if (o.dump_grads) {
    const std::string dir = *o.dump_grads;
    options.on_gradients = [dir](int step, double loss, const std::vector<StageGradients>& g) {
      return step == 0 ? DumpGradients(dir, step + 1, loss, g) : Status::Ok();
    };
  }
  if (o.dump_params) {
    options.on_parameters = [dir = *o.dump_params](int step,
                                                   const std::vector<StageParameters>& p) {
      return DumpParameters(dir, step, p);
    };
  }
  PIPEPLAN_ASSIGN_OR_RETURN(std::unique_ptr<TorchExecutor> executor,
                            TorchExecutor::Create(plan, rank, options));
  RankExecutor made{.executor = nullptr, .torch = executor.get()};
  made.executor = std::move(executor);
  if (o.fault) {
    made.executor =
        std::make_unique<runtime::FaultInjectingExecutor>(std::move(made.executor), rank, *o.fault);
  }
  return made;
}

// Each rank's peak in the median step, as its allocator counted it (memory_meter.h).
void PrintMemory(const Timeline& step) {
  for (const RankTimeline& rank : step.ranks) {
    if (rank.memory_unit != MemoryUnit::kBytes) continue;
    std::cout << "memory: rank " << rank.rank.value << " peak "
              << app::FormatBytes(rank.peak_memory) << " (static "
              << app::FormatBytes(rank.peak_memory - rank.peak_activation_memory)
              << ", activations and transients " << app::FormatBytes(rank.peak_activation_memory)
              << ")\n";
  }
}

// "gradients: 2 of 4 steps clipped, 1 skipped (non-finite), ...": rank 0's records (every
// rank decides alike); with post-validation, what the verdicts undid over all ranks and the
// most each rank's undo copy held (`undo_bytes`, by rank: where this process knows them).
void PrintGradientSummary(const std::vector<std::vector<StepRecord>>& by_rank,
                          const std::vector<int64_t>& undo_bytes) {
  const std::vector<StepRecord>& records = by_rank.front();
  int clipped = 0;
  int skipped = 0;
  for (const StepRecord& r : records) {
    clipped += r.clipped ? 1 : 0;
    skipped += r.skipped ? 1 : 0;
  }
  std::cout << "gradients: " << clipped << " of " << records.size() << " steps clipped, " << skipped
            << " skipped (non-finite), by the global gradient norm over every rank\n";
  int rolled_back = 0;
  int replayed = 0;
  for (const std::vector<StepRecord>& rank : by_rank) {
    for (const StepRecord& r : rank) {
      rolled_back += r.rolled_back ? 1 : 0;
      replayed += r.replayed_forwards;
    }
  }
  if (rolled_back + replayed > 0) {
    std::cout << "post-validation: " << rolled_back << " speculative rank updates rolled back, "
              << replayed << " forwards replayed on the corrected weights\n";
  }
  if (std::any_of(undo_bytes.begin(), undo_bytes.end(), [](int64_t b) { return b > 0; })) {
    std::cout << "post-validation: undo copy of a speculative update (parameters and optimizer "
                 "state), by rank:";
    for (size_t r = 0; r < undo_bytes.size(); ++r) {
      std::cout << (r == 0 ? " " : ", ") << app::FormatBytes(static_cast<double>(undo_bytes[r]));
    }
    std::cout << "\n";
  }
}

// ---- the split check of a profile -------------------------------------------------------

// B timed alone after the steps (backward_reference.h), seconds by stage: for the profile of
// a plan that splits its backwards, set beside the I + W its steps measured.
using FullBackwards = std::map<int, double>;
constexpr int kReferenceRepetitions = 5;

bool SplitsBackward(const Plan& plan) {
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (action.kind == ActionKind::kBackwardInput) return true;
    }
  }
  return false;
}

// This rank's stages' B alone, when the run profiles a split plan (else none).
StatusOr<FullBackwards> TimeFullBackwards(const Plan& plan, const Options& o,
                                          const TorchExecutor& executor) {
  FullBackwards seconds;
  if (!o.profile || !SplitsBackward(plan)) return seconds;
  const int last = plan.request.topology.num_stages() - 1;
  for (const std::unique_ptr<StageModule>& stage : executor.stages()) {
    const BackwardReference reference{.last_stage = stage->stage() == last,
                                      .microbatches = plan.request.topology.microbatches,
                                      .repetitions = kReferenceRepetitions};
    PIPEPLAN_ASSIGN_OR_RETURN(seconds[stage->stage()],
                              MedianBackwardSeconds(*stage, o.model, executor.device(), reference));
  }
  return seconds;
}

// "split: ..." and one line per stage that measured I and W: I + W against B alone.
std::string SplitLines(const Profile& profile, const FullBackwards& full_backwards) {
  if (full_backwards.empty()) return "";
  std::string lines = "split: I + W of the steps against B timed alone after them (median of " +
                      std::to_string(kReferenceRepetitions) + " microbatches), by stage:\n";
  for (const auto& [stage, b] : full_backwards) {
    if (stage < 0 || stage >= static_cast<int>(profile.stages.size())) continue;
    const StageProfile& measured = profile.stages[stage];
    if (measured.backward_input.samples == 0 || measured.backward_weight.samples == 0) continue;
    const double i = measured.backward_input.median;
    const double w = measured.backward_weight.median;
    char line[200];
    std::snprintf(line, sizeof line,
                  "  stage %d: I %.3f ms + W %.3f ms = %.3f ms, B %.3f ms: (I + W) / B = %.3f\n",
                  stage, i * 1e3, w * 1e3, (i + w) * 1e3, b * 1e3, b > 0 ? (i + w) / b : 0.0);
    lines += line;
  }
  return lines;
}

// Writes the timeline, profile and metrics the run asked for, then prints a summary.
// `records[r]` is rank r's step records.
Status Report(const Plan& plan, const Options& o, const std::vector<Timeline>& steps,
              const std::vector<std::vector<StepRecord>>& records,
              const std::vector<int64_t>& undo_bytes, const FullBackwards& full_backwards) {
  const Timeline& median = MedianStep(steps);
  std::vector<app::OutputFile> files;
  std::string split_lines;
  if (o.timeline) {
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::string content,
        SerializeTimelineFile({median, plan, kMicroseconds}, DetectProtoFormat(*o.timeline, "")));
    files.push_back({*o.timeline, std::move(content)});
  }
  if (o.profile) {
    ProfileOptions options;
    options.seconds_per_unit = kMicroseconds;
    // The clock goes with the device: a GPU profile is in kernel time (CUDA events).
    const bool gpu = o.transport == TransportKind::kNccl || o.gpu >= 0;
    std::string device = gpu ? "cuda, CUDA-event times" : "cpu, host-clock times";
    if (o.serial) device += ", ranks as threads taking turns";
    options.source = std::string("pipeplan-torch ") + device + ", " +
                     Describe(o.model, plan.request.topology.num_stages());
    PIPEPLAN_ASSIGN_OR_RETURN(const Profile profile, BuildProfile(plan, steps, options));
    split_lines = SplitLines(profile, full_backwards);
    PIPEPLAN_ASSIGN_OR_RETURN(std::string content,
                              SerializeProfile(profile, DetectProtoFormat(*o.output, "")));
    files.push_back({*o.output, std::move(content)});
  }
  if (o.metrics) files.push_back({*o.metrics, StepMetricsJsonLines(records, o.warmup)});
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files, /*create_parents=*/true));
  std::string how = TransportName(o.transport);
  if (o.device != "cpu") how += ", " + o.device;
  if (o.serial) how += ", one op at a time";
  char line[200];
  std::snprintf(line, sizeof line, "steps: %d warm-up + %d measured; median step %.2f ms (%s)\n",
                o.warmup, o.steps, median.metrics.makespan * kMicroseconds * 1e3, how.c_str());
  std::cout << line;
  PrintMemory(median);
  std::cout << split_lines;
  if ((o.clip_grad_norm > 0 || o.inject_nonfinite) && !records.empty()) {
    PrintGradientSummary(records, undo_bytes);
  }
  for (const app::OutputFile& file : files) std::cout << "wrote " << file.path << "\n";
  return Status::Ok();
}

// torchrun's LOCAL_RANK (the GPU of this process), else the global rank.
int LocalRank(int rank) {
  const char* local = std::getenv("LOCAL_RANK");
  return local != nullptr ? std::atoi(local) : rank;
}

// A directory the run will write into: created now and written to once, so that a path that
// cannot be written fails before the run rather than after its steps.
Status CheckWritableDirectory(const std::string& dir, const std::string& flag) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return InvalidArgument(flag + ": cannot create '" + dir + "': " + error.message());
  std::string probe = dir + "/.pipeplan-write-check-XXXXXX";
  const int fd = mkstemp(probe.data());
  if (fd < 0) {
    return InvalidArgument(flag + ": cannot write in '" + dir + "': " + std::strerror(errno));
  }
  close(fd);
  unlink(probe.c_str());
  return Status::Ok();
}

Status CheckOptionsAgainstPlan(const Plan& plan, const Options& o) {
  if (o.dump_grads) PIPEPLAN_RETURN_IF_ERROR(CheckWritableDirectory(*o.dump_grads, "--dump-grads"));
  if (o.dump_params) {
    PIPEPLAN_RETURN_IF_ERROR(CheckWritableDirectory(*o.dump_params, "--dump-params"));
  }
  if (o.metrics) {
    const std::filesystem::path parent = std::filesystem::path(*o.metrics).parent_path();
    PIPEPLAN_RETURN_IF_ERROR(
        CheckWritableDirectory(parent.empty() ? "." : parent.string(), "--metrics"));
  }
  if (o.transport == TransportKind::kNccl) {
    PIPEPLAN_RETURN_IF_ERROR(CudaDeviceAvailable().WithContext("--transport nccl"));
  }
  if (o.gpu >= 0) {
    PIPEPLAN_RETURN_IF_ERROR(CudaDeviceAvailable().WithContext("--device " + o.device));
  }
  if (o.fault) {
    PIPEPLAN_RETURN_IF_ERROR(
        runtime::CheckFault(plan, *o.fault, o.warmup + o.steps).WithContext("--inject-fault"));
    if (o.fault->kind == runtime::FaultKind::kCrash && o.transport == TransportKind::kInProc) {
      return InvalidArgument("--inject-fault: a crash needs one process per rank (gloo)");
    }
  }
  if (o.inject_nonfinite) {
    const int total = o.warmup + o.steps;
    const int stages = plan.request.topology.num_stages();
    if (o.inject_nonfinite->step >= total || o.inject_nonfinite->stage >= stages) {
      return InvalidArgument(
          "--inject-nonfinite: step " + std::to_string(o.inject_nonfinite->step + 1) + ", stage " +
          std::to_string(o.inject_nonfinite->stage) + " is outside the run (steps 1 to " +
          std::to_string(total) + ", stages 0 to " + std::to_string(stages - 1) + ")");
    }
  }
  if (o.local_ranks && *o.local_ranks != plan.request.topology.ranks) {
    return InvalidArgument("--local-ranks " + std::to_string(*o.local_ranks) +
                           " but the plan has " + std::to_string(plan.request.topology.ranks) +
                           " ranks");
  }
  return Status::Ok();
}

// The ranks as threads of this process, on the CPU or all on one GPU (--device cuda:N: CUDA-
// event timers, messages copied on the device, one op at a time).
Status RunInProcess(const Plan& plan, const Options& o) {
  const int ranks = plan.request.topology.ranks;
  const bool gpu = o.gpu >= 0;
  // The CUDA allocator's figures are the device's: ranks sharing it count their own turns
  // (cuda:N implies --serial). On the CPU each rank's thread has an account of its own.
  const bool memory_in_turns = gpu && ranks > 1;
  std::mutex shared_device;
  std::vector<RankExecutor> executors;
  std::vector<std::unique_ptr<runtime::OpTimer>> timers;
  for (int r = 0; r < ranks; ++r) {
    PIPEPLAN_ASSIGN_OR_RETURN(RankExecutor executor,
                              MakeExecutor(plan, RankId(r), o, o.device, memory_in_turns));
    executors.push_back(std::move(executor));
    if (gpu) {
      PIPEPLAN_ASSIGN_OR_RETURN(std::unique_ptr<runtime::OpTimer> timer, MakeCudaEventTimer(o.gpu));
      timers.push_back(std::move(timer));
    }
  }
  std::mutex* turns = o.serial ? &shared_device : nullptr;
  std::vector<std::unique_ptr<runtime::Transport>> transports = runtime::MakeInProcTransports(
      ranks, gpu ? CudaDeviceCopy(o.gpu, turns) : runtime::CopyBytes{});
  std::vector<runtime::OpExecutor*> executor_ptrs;
  std::vector<runtime::Transport*> transport_ptrs;
  for (int r = 0; r < ranks; ++r) {
    executor_ptrs.push_back(executors[r].executor.get());
    transport_ptrs.push_back(transports[r].get());
  }
  runtime::LocalRunOptions run;
  for (const std::unique_ptr<runtime::OpTimer>& timer : timers) run.timers.push_back(timer.get());
  run.shared_device = turns;
  run.steps = o.steps;
  run.warmup = o.warmup;
  run.timeout_seconds = o.timeout;
  run.seconds_per_unit = kMicroseconds;
  run.on_step = [&](const runtime::StepReport& report) {
    std::cerr << "step " << report.step + 1 << "/" << o.steps + o.warmup
              << (report.warmup ? " (warm-up)" : "") << ": " << report.seconds * 1e3 << " ms\n";
  };
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<Timeline> steps,
                            runtime::RunLocal(plan, executor_ptrs, transport_ptrs, run));
  std::vector<std::vector<StepRecord>> records;
  std::vector<int64_t> undo_bytes;
  FullBackwards full_backwards;
  records.reserve(executors.size());
  for (const RankExecutor& executor : executors) {
    records.push_back(executor.torch->step_records());
    undo_bytes.push_back(executor.torch->undo_bytes());
    PIPEPLAN_ASSIGN_OR_RETURN(const FullBackwards mine,
                              TimeFullBackwards(plan, o, *executor.torch));
    full_backwards.insert(mine.begin(), mine.end());
  }
  return Report(plan, o, steps, records, undo_bytes, full_backwards);
}

std::chrono::milliseconds TimeoutOf(const Options& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000));
}

std::string TimelineKey(int rank, int step) {
  return "timeline/" + std::to_string(rank) + "/" + std::to_string(step);
}

// Every rank hands its measured steps to rank 0 through the store, one per key.
Status PublishTimelines(Coordinator& coordinator, RankId rank, std::vector<RankTimeline> steps) {
  for (size_t step = 0; step < steps.size(); ++step) {
    Timeline carrier;
    carrier.ranks.push_back(std::move(steps[step]));
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes,
                              SerializeTimeline(carrier, ProtoFormat::kBinary));
    PIPEPLAN_RETURN_IF_ERROR(
        coordinator.Put(TimelineKey(rank.value, static_cast<int>(step)), bytes));
  }
  return Status::Ok();
}

StatusOr<RankTimeline> FetchTimeline(Coordinator& coordinator, int rank, int step,
                                     std::chrono::milliseconds timeout) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes,
                            coordinator.Get(TimelineKey(rank, step), timeout));
  PIPEPLAN_ASSIGN_OR_RETURN(Timeline carrier, ParseTimeline(bytes, ProtoFormat::kBinary));
  if (carrier.ranks.size() != 1) {
    return Internal("rank " + std::to_string(rank) + " sent no timeline for step " +
                    std::to_string(step));
  }
  return std::move(carrier.ranks.front());
}

// Rank 0: every rank's steps, assembled into one Timeline per measured step.
StatusOr<std::vector<Timeline>> GatherTimelines(Coordinator& coordinator, const Plan& plan,
                                                int steps, std::chrono::milliseconds timeout) {
  std::vector<Timeline> gathered;
  for (int step = 0; step < steps; ++step) {
    std::vector<RankTimeline> ranks;
    for (int r = 0; r < plan.request.topology.ranks; ++r) {
      PIPEPLAN_ASSIGN_OR_RETURN(RankTimeline timeline,
                                FetchTimeline(coordinator, r, step, timeout));
      ranks.push_back(std::move(timeline));
    }
    PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, AssembleMeasuredTimeline(plan, std::move(ranks)));
    gathered.push_back(std::move(timeline));
  }
  return gathered;
}

// Each rank's B alone per stage, to rank 0 through the store (shortest round-trip text).
Status PublishFullBackwards(Coordinator& coordinator, const FullBackwards& seconds) {
  for (const auto& [stage, value] : seconds) {
    char text[32];
    const auto written = std::to_chars(text, text + sizeof text, value);
    PIPEPLAN_RETURN_IF_ERROR(
        coordinator.Put("backward/" + std::to_string(stage), std::string(text, written.ptr)));
  }
  return Status::Ok();
}

StatusOr<FullBackwards> GatherFullBackwards(Coordinator& coordinator, const Plan& plan,
                                            const Options& o, std::chrono::milliseconds timeout) {
  FullBackwards seconds;
  if (!o.profile || !SplitsBackward(plan)) return seconds;
  for (int stage = 0; stage < plan.request.topology.num_stages(); ++stage) {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string text,
                              coordinator.Get("backward/" + std::to_string(stage), timeout));
    double value = 0;
    const auto read = std::from_chars(text.data(), text.data() + text.size(), value);
    if (read.ec != std::errc() || read.ptr != text.data() + text.size()) {
      return Internal("stage " + std::to_string(stage) + ": B alone came back as '" + text + "'");
    }
    seconds[stage] = value;
  }
  return seconds;
}

// Every rank's step records, to rank 0 through the store.
Status PublishStepRecords(Coordinator& coordinator, RankId rank,
                          const std::vector<StepRecord>& records) {
  return coordinator.Put("records/" + std::to_string(rank.value), EncodeStepRecords(records));
}

StatusOr<std::vector<std::vector<StepRecord>>> GatherStepRecords(
    Coordinator& coordinator, int ranks, std::chrono::milliseconds timeout) {
  std::vector<std::vector<StepRecord>> gathered;
  for (int r = 0; r < ranks; ++r) {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string text,
                              coordinator.Get("records/" + std::to_string(r), timeout));
    std::optional<std::vector<StepRecord>> records = DecodeStepRecords(text);
    if (!records) return Internal("rank " + std::to_string(r) + " sent malformed step records");
    gathered.push_back(*std::move(records));
  }
  return gathered;
}

// Rank 0 may host the store (--local-ranks): it leaves last, once every other rank has passed
// the final barrier, so no rank loses the store inside it.
Status LeaveTogether(Coordinator& coordinator, const Rendezvous& r,
                     std::chrono::milliseconds timeout) {
  PIPEPLAN_RETURN_IF_ERROR(coordinator.Barrier("done", timeout));
  if (r.rank != 0) return coordinator.Put("left/" + std::to_string(r.rank), "");
  for (int rank = 1; rank < r.world_size; ++rank) {
    PIPEPLAN_RETURN_IF_ERROR(coordinator.Get("left/" + std::to_string(rank), timeout).status());
  }
  return Status::Ok();
}

// One rank of a multi-process run (torchrun or a child spawned by --local-ranks).
Status RunAsRank(const Plan& plan, const Options& o) {
  PIPEPLAN_ASSIGN_OR_RETURN(Rendezvous rendezvous, RendezvousFromEnvironment());
  if (rendezvous.world_size != plan.request.topology.ranks) {
    return InvalidArgument("WORLD_SIZE is " + std::to_string(rendezvous.world_size) +
                           " but the plan has " + std::to_string(plan.request.topology.ranks) +
                           " ranks");
  }
  rendezvous.timeout = TimeoutOf(o);
  const RankId rank(rendezvous.rank);
  PIPEPLAN_ASSIGN_OR_RETURN(GlooConnection connection, ConnectGloo(rendezvous));
  std::string device = "cpu";
  std::unique_ptr<runtime::OpTimer> timer;
  if (o.transport == TransportKind::kNccl) {
    // Gloo stays for the store's barriers and the timelines; tensors move over NCCL.
    const int gpu = LocalRank(rendezvous.rank);
    PIPEPLAN_ASSIGN_OR_RETURN(NcclConnection nccl,
                              ConnectNccl(*connection.coordinator, rendezvous.rank,
                                          rendezvous.world_size, gpu, TimeoutOf(o)));
    connection.transport = std::move(nccl.transport);
    PIPEPLAN_ASSIGN_OR_RETURN(timer, MakeCudaEventTimer(gpu, nccl.comm_stream));
    device = "cuda:" + std::to_string(gpu);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(RankExecutor made, MakeExecutor(plan, rank, o, device));
  runtime::OpExecutor* executor = made.executor.get();
  runtime::RankRunOptions run;
  run.timer = timer.get();
  run.steps = o.steps;
  run.warmup = o.warmup;
  run.timeout_seconds = o.timeout;
  run.seconds_per_unit = kMicroseconds;
  Coordinator& coordinator = *connection.coordinator;
  run.barrier = [&](int step) {
    return coordinator.Barrier("step-" + std::to_string(step), TimeoutOf(o));
  };
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<RankTimeline> mine,
                            runtime::RunRank(plan, rank, *executor, *connection.transport, run));
  // The steps are done: stop the transport's watch on the store now, so that no rank still
  // polls it when rank 0 (which may host it) leaves.
  timer.reset();
  connection.transport.reset();
  PIPEPLAN_RETURN_IF_ERROR(PublishTimelines(coordinator, rank, std::move(mine)));
  PIPEPLAN_RETURN_IF_ERROR(PublishStepRecords(coordinator, rank, made.torch->step_records()));
  PIPEPLAN_ASSIGN_OR_RETURN(const FullBackwards own_backwards,
                            TimeFullBackwards(plan, o, *made.torch));
  PIPEPLAN_RETURN_IF_ERROR(PublishFullBackwards(coordinator, own_backwards));
  Status reported = Status::Ok();
  if (rank.value == 0) {
    reported = [&]() -> Status {
      PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<Timeline> steps,
                                GatherTimelines(coordinator, plan, o.steps, TimeoutOf(o)));
      PIPEPLAN_ASSIGN_OR_RETURN(
          const std::vector<std::vector<StepRecord>> records,
          GatherStepRecords(coordinator, plan.request.topology.ranks, TimeoutOf(o)));
      PIPEPLAN_ASSIGN_OR_RETURN(const FullBackwards full_backwards,
                                GatherFullBackwards(coordinator, plan, o, TimeoutOf(o)));
      return Report(plan, o, steps, records, /*undo_bytes=*/{}, full_backwards);
    }();
  }
  PIPEPLAN_RETURN_IF_ERROR(LeaveTogether(coordinator, rendezvous, TimeoutOf(o)));
  return reported;
}

// ---- the --local-ranks launcher ------------------------------------------------------------

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

// Spawns one process per rank (this program, same arguments, torchrun's variables set) and
// waits for all. Once one fails the others get the timeout to stop by themselves, then are
// killed, so the launcher never hangs.
int LaunchLocalRanks(int ranks, const Options& o, const std::vector<std::string>& argv) {
  const int port = FreeLocalPort();
  if (port == 0) {
    std::cerr << "pipeplan-torch: error: no free TCP port on 127.0.0.1 for the rendezvous\n";
    return app::kExitInvalidInput;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::map<pid_t, int> running;  // pid -> rank
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      if (entry.starts_with("RANK=") || entry.starts_with("WORLD_SIZE=") ||
          entry.starts_with("MASTER_ADDR=") || entry.starts_with("MASTER_PORT=") ||
          entry.starts_with("LOCAL_RANK=")) {
        continue;
      }
      env.emplace_back(entry);
    }
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(ranks));
    env.emplace_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), envp.data()) != 0) {
      std::cerr << "pipeplan-torch: error: could not start rank " << r << "\n";
      for (const auto& [child, rank] : running) kill(child, SIGKILL);
      for (const auto& [child, rank] : running) waitpid(child, nullptr, 0);
      return app::kExitInvalidInput;
    }
    running[pid] = r;
  }
  int exit_code = app::kExitOk;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid) != 0) {
      const int rank = running[pid];
      running.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::cerr << "pipeplan-torch: rank " << rank << " " << DescribeExit(status) << "\n";
        exit_code = app::kExitInvalidInput;
        if (!kill_at) {
          kill_at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000) + 5000);
        }
      }
      continue;
    }
    if (kill_at && !killed && std::chrono::steady_clock::now() > *kill_at) {
      for (const auto& [child, rank] : running) {
        std::cerr << "pipeplan-torch: rank " << rank << " did not stop within the timeout; "
                  << "killing it\n";
        kill(child, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> all(argv, argv + argc);
  const std::vector<std::string> args(all.begin() + std::min<size_t>(2, all.size()), all.end());
  const std::string command = argc >= 2 ? all[1] : "";
  if (command == "-h" || command == "--help" || command.empty()) {
    std::cout << kHelp;
    return command.empty() ? app::kExitUsage : app::kExitOk;
  }
  if (command != "run" && command != "profile") {
    std::cerr << "pipeplan-torch: error: unknown command '" << command
              << "' (expected run or profile; see --help)\n";
    return app::kExitUsage;
  }
  const auto usage_error = [&](const Status& status) {
    std::cerr << "pipeplan-torch " << command << ": error: " << status.message()
              << "\n(see 'pipeplan-torch --help')\n";
    return app::kExitUsage;
  };
  const auto input_error = [&](const Status& status) {
    std::cerr << "pipeplan-torch " << command << ": error: " << status.message() << "\n";
    return app::kExitInvalidInput;
  };
  StatusOr<Flags> flags = Flags::Parse(args, Specs());
  if (!flags.ok()) return usage_error(flags.status());
  if (flags->help()) {
    std::cout << kHelp;
    return app::kExitOk;
  }
  StatusOr<Options> options = ParseOptions(*flags, command == "profile");
  if (!options.ok()) return usage_error(options.status());
  StatusOr<Plan> plan = app::ReadPlanFile(options->plan_path);
  Status status = plan.ok() ? CheckOptionsAgainstPlan(*plan, *options) : plan.status();
  if (!status.ok()) return input_error(status);
  at::set_num_threads(options->threads);

  const bool is_child = std::getenv("RANK") != nullptr;
  const bool in_process = options->transport == TransportKind::kInProc;
  const int plan_ranks = plan->request.topology.ranks;
  if (!in_process && !is_child && !options->local_ranks && plan_ranks > 1) {
    // Outside torchrun: run the plan's ranks here rather than fail on a missing RANK.
    std::cerr << "pipeplan-torch " << command << ": not under torchrun (RANK is not set): "
              << "running the plan's " << plan_ranks << " ranks as processes of this machine "
              << "(--local-ranks " << plan_ranks << ")\n";
    options->local_ranks = plan_ranks;
  }
  if (!in_process && !is_child && options->local_ranks) {
    return LaunchLocalRanks(*options->local_ranks, *options, all);
  }
  if (in_process || (!is_child && plan->request.topology.ranks == 1)) {
    status = RunInProcess(*plan, *options);
  } else {
    status = RunAsRank(*plan, *options);
    if (!status.ok()) {
      // Name the reporting rank once: a failing action already reads "rank R, action ...".
      const char* rank = std::getenv("RANK");
      const std::string own = "rank " + std::string(rank == nullptr ? "?" : rank);
      if (!status.message().starts_with(own + ",")) status = status.WithContext(own);
    }
  }
  if (!status.ok()) return input_error(status);
  return app::kExitOk;
}

}  // namespace
}  // namespace pipeplan::torch_ext

int main(int argc, char** argv) {
  pipeplan::app::WriteStderrByLines();
  return pipeplan::torch_ext::Main(argc, argv);
}
