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

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/dispatch.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/fault_injection.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/runtime/rank_processes.h"
#include "pipeplan/runtime/rank_session.h"
#include "pipeplan/torch_ext/backward_reference.h"
#include "pipeplan/torch_ext/cuda_copy.h"
#include "pipeplan/torch_ext/cuda_op_timer.h"
#include "pipeplan/torch_ext/gloo_transport.h"
#include "pipeplan/torch_ext/nccl_transport.h"
#include "pipeplan/torch_ext/stage_dump.h"
#include "pipeplan/torch_ext/torch_executor.h"
#include "rank_exchange.h"
#include "run_options.h"
#include "run_report.h"

namespace pipeplan::torch_ext {
namespace {

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
  --steps-svg FILE        write an SVG of the first three measured steps one after another
                          (step k's microbatch m labelled kM + m): with --no-step-barrier,
                          where step k+1's first actions ran over step k's tail. Ranks in
                          processes time each step from its barrier: drawn back to back
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

// ---- the split check of a profile -------------------------------------------------------

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
  StepTimes times;
  run.on_step = [&](const runtime::StepReport& report) {
    std::cerr << "step " << report.step + 1 << "/" << o.steps + o.warmup
              << (report.warmup ? " (warm-up)" : "") << ": " << report.seconds * 1e3 << " ms\n";
    if (report.warmup) return;
    if (!o.step_barrier) times.added.push_back(report.seconds / kMicroseconds);
    times.starts.push_back(report.start / kMicroseconds);
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
  return Report(plan, o, steps, records, undo_bytes, full_backwards, std::move(times));
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
  runtime::RankSessionOptions session;
  session.run.steps = o.steps;
  session.run.warmup = o.warmup;
  session.run.timeout_seconds = o.timeout;
  session.run.seconds_per_unit = kMicroseconds;
  session.run.step_barrier = o.step_barrier;
  session.world_size = rendezvous.world_size;
  session.timeout = TimeoutOf(o);
  // Besides the timelines rank 0 reports each rank's step records and, where it compares
  // them, each stage's full backward timed alone.
  session.publish = [&](runtime::Coordinator& coordinator) -> Status {
    PIPEPLAN_RETURN_IF_ERROR(PublishStepRecords(coordinator, rank, made.torch->step_records()));
    PIPEPLAN_ASSIGN_OR_RETURN(const FullBackwards own_backwards,
                              TimeFullBackwards(plan, o, *made.torch));
    return PublishFullBackwards(coordinator, own_backwards);
  };
  session.report = [&](runtime::Coordinator& coordinator,
                       const runtime::GatheredSteps& gathered) -> Status {
    PIPEPLAN_ASSIGN_OR_RETURN(
        const std::vector<std::vector<StepRecord>> records,
        GatherStepRecords(coordinator, plan.request.topology.ranks, TimeoutOf(o)));
    FullBackwards full_backwards;
    if (TimesFullBackwards(plan, o)) {
      PIPEPLAN_ASSIGN_OR_RETURN(
          full_backwards,
          GatherFullBackwards(coordinator, plan.request.topology.num_stages(), TimeoutOf(o)));
    }
    return Report(plan, o, gathered.steps, records, /*undo_bytes=*/{}, full_backwards,
                  StepTimes{.added = gathered.added, .starts = gathered.starts});
  };
  return runtime::RunRankSession(plan, rank, *made.executor, std::move(connection.transport),
                                 std::move(timer), *connection.coordinator, std::move(session));
}

// A run or a profile, its options parsed: the plan read and checked against them, then run
// where the options and the environment say (in process, as one rank of torchrun's, or as the
// launcher of the plan's ranks on this machine).
Status Execute(const Options& given) {
  Options o = given;
  PIPEPLAN_ASSIGN_OR_RETURN(const Plan plan, app::ReadPlanFile(o.plan_path));
  PIPEPLAN_RETURN_IF_ERROR(CheckOptionsAgainstPlan(plan, o));
  const std::optional<std::string> profile = o.profile ? o.output : std::optional<std::string>();
  PIPEPLAN_RETURN_IF_ERROR(app::CheckOutputPaths({o.timeline, profile, o.metrics, o.steps_svg}));
  at::set_num_threads(o.threads);

  const bool is_child = std::getenv("RANK") != nullptr;
  const bool in_process = o.transport == TransportKind::kInProc;
  const int plan_ranks = plan.request.topology.ranks;
  if (!in_process && !is_child && !o.local_ranks && plan_ranks > 1) {
    // Outside torchrun: run the plan's ranks here rather than fail on a missing RANK.
    std::cerr << app::ProgramName() << (o.profile ? " profile" : " run")
              << ": not under torchrun (RANK is not set): running the plan's " << plan_ranks
              << " ranks as processes of this machine (--local-ranks " << plan_ranks << ")\n";
    o.local_ranks = plan_ranks;
  }
  if (!in_process && !is_child && o.local_ranks) {
    return runtime::LaunchLocalRanks(*o.local_ranks, o.timeout, app::ProgramName());
  }
  if (in_process || (!is_child && plan_ranks == 1)) return RunInProcess(plan, o);
  Status status = RunAsRank(plan, o);
  if (!status.ok()) {
    // Name the reporting rank once: a failing action already reads "rank R, action ...".
    const char* rank = std::getenv("RANK");
    const std::string own = "rank " + std::string(rank == nullptr ? "?" : rank);
    if (!status.message().starts_with(own + ",")) status = status.WithContext(own);
  }
  return status;
}

StatusOr<Options> ParseRun(const app::Flags& flags) { return ParseOptions(flags, false); }
StatusOr<Options> ParseProfile(const app::Flags& flags) { return ParseOptions(flags, true); }

int RunCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<Options> kSpec = {"run", kHelp, RunFlags(), ParseRun, Execute};
  return app::RunCommand(kSpec, args);
}

int ProfileCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<Options> kSpec = {"profile", kHelp, RunFlags(), ParseProfile,
                                                  Execute};
  return app::RunCommand(kSpec, args);
}

constexpr app::Subcommand kCommands[] = {
    {"run", "run a plan on LibTorch stages, timing every op", RunCommand},
    {"profile", "the same run, writing the per-stage durations 'pipeplan calibrate' reads",
     ProfileCommand},
};

constexpr std::string_view kAbout =
    "Runs a pipeplan plan with LibTorch: the built-in model or your TorchScript stages, ranks\n"
    "as processes over Gloo or NCCL (torchrun, or spawned here) or as threads of this process.\n";

constexpr std::string_view kEpilogue =
    "Exit codes: 0 success, 1 a rank failed (its error names the rank and the action) or an\n"
    "invalid input, 2 usage error.\n";

int Main(int argc, char** argv) {
  return app::Dispatch({.name = "pipeplan-torch",
                        .about = kAbout,
                        .commands = kCommands,
                        .epilogue = kEpilogue,
                        .version = ToolVersion()},
                       std::vector<std::string>(argv + 1, argv + argc));
}

}  // namespace
}  // namespace pipeplan::torch_ext

int main(int argc, char** argv) {
  pipeplan::app::WriteStderrByLines();
  pipeplan::app::IgnoreBrokenPipes();  // Gloo's sockets: a dead peer is an error naming it
  return pipeplan::torch_ext::Main(argc, argv);
}
