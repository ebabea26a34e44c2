// pipeplan-torch: runs pipeplan plans on the built-in transformer with LibTorch, every op
// timed. 'run' executes and writes the measured timeline (and, on request, the gradients of
// the first step); 'profile' does the same and writes a Profile for 'pipeplan calibrate'.
// Ranks are processes (Gloo via c10d; torchrun, or --local-ranks P to spawn them) or threads
// of this process (--transport inproc). This file: the help, each rank's executor, the two
// ways to run (threads, or this process as one rank) and the report; the flags are in
// run_options, what ranks hand rank 0 in rank_exchange, the launcher in local_launcher.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "local_launcher.h"
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
#include "pipeplan/simulation/timeline_metrics.h"
#include "pipeplan/torch_ext/backward_reference.h"
#include "pipeplan/torch_ext/cuda_copy.h"
#include "pipeplan/torch_ext/cuda_op_timer.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/nccl_transport.h"
#include "pipeplan/torch_ext/stage_dump.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "rank_exchange.h"
#include "run_options.h"

extern char** environ;

namespace pipeplan::torch_ext {
namespace {

using app::Flags;

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
  --no-step-barrier       each rank starts its next step as soon as it ended its last
                          (default: every step opens on all ranks at once; processes then
                          meet only before the first), so a speculative update
                          (post-validation) waits for no other rank; a line says what each
                          step adds to the run, the figure to compare
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
  --no-memory             count no bytes: no counting allocator on the CPU, no reading of
                          the caching allocator's statistics around each op on a GPU; the
                          timeline and profile then carry times alone (to see what
                          counting costs a step: docs/torch.md)
  --inject-fault F        testing aid: KIND@RANK:ACTION[:STEP], KIND fail, throw, stall or
                          crash (the process exits at once, as a dying peer would) on a
                          compute action, or truncate (a malformed message) on a send
  -h, --help              show this help

Exit code 0 on success, 1 when a rank fails (its error names the rank and the action; the
other ranks stop with an error within --timeout), 2 for a usage error.
)";

constexpr double kMicroseconds = 1e-6;  // the timelines' unit

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
  options.count_memory = o.count_memory;
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

// B alone, for the profile of a plan that splits its backwards: set beside the I + W its
// steps measured.
constexpr int kReferenceRepetitions = 5;

// Whether this run times B alone: a profile of a plan that splits its backwards.
bool TimesFullBackwards(const Plan& plan, const Options& o) {
  if (!o.profile) return false;
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
  if (!TimesFullBackwards(plan, o)) return seconds;
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
// `added`: without the step barrier, what each step added to the run (microseconds).
Status Report(const Plan& plan, const Options& o, const std::vector<Timeline>& steps,
              const std::vector<std::vector<StepRecord>>& records,
              const std::vector<int64_t>& undo_bytes, const FullBackwards& full_backwards,
              std::vector<double> added) {
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
  if (!added.empty()) {
    std::sort(added.begin(), added.end());
    std::snprintf(line, sizeof line,
                  "no step barrier: each step adds a median %.2f ms to the run (%zu steps; the "
                  "median step above counts from its earliest rank's start)\n",
                  added[added.size() / 2] * kMicroseconds * 1e3, added.size());
    std::cout << line;
  }
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
  run.step_barrier = o.step_barrier;
  run.steps = o.steps;
  run.warmup = o.warmup;
  run.timeout_seconds = o.timeout;
  run.seconds_per_unit = kMicroseconds;
  std::vector<double> added;  // microseconds, measured steps, without the step barrier
  run.on_step = [&](const runtime::StepReport& report) {
    std::cerr << "step " << report.step + 1 << "/" << o.steps + o.warmup
              << (report.warmup ? " (warm-up)" : "") << ": " << report.seconds * 1e3 << " ms\n";
    if (!o.step_barrier && !report.warmup) added.push_back(report.seconds / kMicroseconds);
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
  return Report(plan, o, steps, records, undo_bytes, full_backwards, std::move(added));
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
  run.step_barrier = o.step_barrier;
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
      std::vector<double> added;
      PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<Timeline> steps,
                                GatherTimelines(coordinator, plan, o.steps, TimeoutOf(o),
                                                o.step_barrier ? nullptr : &added));
      PIPEPLAN_ASSIGN_OR_RETURN(
          const std::vector<std::vector<StepRecord>> records,
          GatherStepRecords(coordinator, plan.request.topology.ranks, TimeoutOf(o)));
      FullBackwards full_backwards;
      if (TimesFullBackwards(plan, o)) {
        PIPEPLAN_ASSIGN_OR_RETURN(
            full_backwards,
            GatherFullBackwards(coordinator, plan.request.topology.num_stages(), TimeoutOf(o)));
      }
      return Report(plan, o, steps, records, /*undo_bytes=*/{}, full_backwards, std::move(added));
    }();
  }
  PIPEPLAN_RETURN_IF_ERROR(LeaveTogether(coordinator, rendezvous, TimeoutOf(o)));
  return reported;
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
  StatusOr<Flags> flags = Flags::Parse(args, RunFlags());
  if (!flags.ok()) return usage_error(flags.status());
  if (flags->help()) {
    std::cout << kHelp;
    return app::kExitOk;
  }
  StatusOr<Options> options = ParseOptions(*flags, command == "profile");
  if (!options.ok()) return usage_error(options.status());
  StatusOr<Plan> plan = app::ReadPlanFile(options->plan_path);
  Status status = plan.ok() ? CheckOptionsAgainstPlan(*plan, *options) : plan.status();
  if (status.ok()) {
    const std::optional<std::string> profile =
        options->profile ? options->output : std::optional<std::string>();
    status = app::CheckOutputPaths({options->timeline, profile, options->metrics});
  }
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
    return LaunchLocalRanks(*options->local_ranks, options->timeout, all);
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
  pipeplan::app::IgnoreBrokenPipes();  // Gloo's sockets: a dead peer is an error naming it
  return pipeplan::torch_ext::Main(argc, argv);
}
