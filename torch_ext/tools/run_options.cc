#include "run_options.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "pipeplan/torch_ext/nccl_transport.h"

namespace pipeplan::torch_ext {
namespace {

using app::FlagKind;
using app::Flags;
using app::FlagSpec;

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

}  // namespace

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

const std::vector<FlagSpec>& RunFlags() {
  static const std::vector<FlagSpec> specs = {{"plan"},
                                              {"local-ranks"},
                                              {"transport"},
                                              {"device"},
                                              {"serial", FlagKind::kBool},
                                              {"no-step-barrier", FlagKind::kBool},
                                              {"no-memory", FlagKind::kBool},
                                              {"steps"},
                                              {"warmup"},
                                              {"timeout"},
                                              {"timeline"},
                                              {"steps-svg"},
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
  o.count_memory = !flags.GetBool("no-memory");
  o.step_barrier = !flags.GetBool("no-step-barrier");
  o.metrics = flags.GetString("metrics");
  o.timeline = flags.GetString("timeline");
  o.steps_svg = flags.GetString("steps-svg");
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

std::chrono::milliseconds TimeoutOf(const Options& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.timeout * 1000));
}

}  // namespace pipeplan::torch_ext
