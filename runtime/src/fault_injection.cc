#include "pipeplan/runtime/fault_injection.h"

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace pipeplan::runtime {
namespace {

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

std::optional<long long> NonNegative(std::string_view text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > 1 << 30) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

StatusOr<Fault> ParseFault(std::string_view text) {
  const auto usage = [&](const std::string& what) {
    return InvalidArgument(
        "fault '" + std::string(text) + "': " + what +
        " (expected KIND@RANK:ACTION[:STEP], KIND one of fail, throw, stall, crash, "
        "truncate)");
  };
  const size_t at = text.find('@');
  if (at == std::string_view::npos) return usage("no '@'");
  Fault fault;
  const std::string_view kind = text.substr(0, at);
  if (kind == "fail") {
    fault.kind = FaultKind::kFail;
  } else if (kind == "throw") {
    fault.kind = FaultKind::kThrow;
  } else if (kind == "stall") {
    fault.kind = FaultKind::kStall;
  } else if (kind == "crash") {
    fault.kind = FaultKind::kCrash;
  } else if (kind == "truncate") {
    fault.kind = FaultKind::kTruncate;
  } else {
    return usage("unknown kind '" + std::string(kind) + "'");
  }
  const std::vector<std::string_view> where = Split(text.substr(at + 1), ':');
  if (where.size() < 2 || where.size() > 3) return usage("needs RANK:ACTION or RANK:ACTION:STEP");
  const auto rank = NonNegative(where[0]);
  const auto action = NonNegative(where[1]);
  const auto step = where.size() == 3 ? NonNegative(where[2]) : std::optional<long long>(0);
  if (!rank || !action || !step) return usage("RANK, ACTION and STEP are numbers >= 0");
  fault.rank = RankId(static_cast<int32_t>(*rank));
  fault.action_index = static_cast<size_t>(*action);
  fault.step = static_cast<int>(*step);
  return fault;
}

Status CheckFault(const Plan& plan, const Fault& fault, int total_steps) {
  const auto rank = static_cast<size_t>(fault.rank.value);
  if (rank >= plan.programs.size()) {
    return InvalidArgument("rank " + std::to_string(rank) + " is not in the plan (" +
                           std::to_string(plan.programs.size()) + " ranks)");
  }
  const auto& actions = plan.programs[rank].actions;
  if (fault.action_index >= actions.size()) {
    return InvalidArgument("rank " + std::to_string(rank) + " has " +
                           std::to_string(actions.size()) + " actions, not " +
                           std::to_string(fault.action_index + 1));
  }
  const Action& action = actions[fault.action_index];
  if (fault.kind == FaultKind::kTruncate ? !IsSend(action.kind) : !IsCompute(action.kind)) {
    return InvalidArgument("rank " + std::to_string(rank) + ", action " +
                           std::to_string(fault.action_index) + " is " + ToString(action) +
                           (fault.kind == FaultKind::kTruncate
                                ? ", not a send (truncate hits a send)"
                                : ", not a compute action"));
  }
  if (fault.step >= total_steps) {
    return InvalidArgument("step " + std::to_string(fault.step) + " does not run (steps 0.." +
                           std::to_string(total_steps - 1) + ")");
  }
  return Status::Ok();
}

bool FaultInjectingExecutor::Hits(const OpContext& context) const {
  return armed_ && context.step == fault_.step && context.action_index == fault_.action_index;
}

// A fault on the PV strikes as on any compute action; otherwise the verdict is the inner one.
StatusOr<Verdict> FaultInjectingExecutor::Validate(const Action& pv, const OpContext& context) {
  if (Hits(context) && fault_.kind != FaultKind::kTruncate) {
    PIPEPLAN_RETURN_IF_ERROR(Run(pv, context));
  }
  return inner_->Validate(pv, context);
}

Status FaultInjectingExecutor::Run(const Action& action, const OpContext& context) {
  if (!Hits(context)) return inner_->Run(action, context);
  switch (fault_.kind) {
    case FaultKind::kFail:
      return Internal("injected failure");
    case FaultKind::kThrow:
      throw std::runtime_error("injected exception");
    case FaultKind::kStall: {
      std::mutex mutex;
      std::condition_variable_any never;
      std::unique_lock lock(mutex);
      never.wait(lock, context.stop, [] { return false; });
      return Aborted("stopped while stalled (injected)");
    }
    case FaultKind::kCrash:
      std::fprintf(stderr, "rank %d: crashing at action %zu of step %d (injected)\n",
                   fault_.rank.value, fault_.action_index, fault_.step);
      std::fflush(stderr);
      std::_Exit(kCrashExitCode);
    case FaultKind::kTruncate:
      break;  // hits a send: see SendBuffer
  }
  return inner_->Run(action, context);
}

StatusOr<std::span<std::byte>> FaultInjectingExecutor::SendBuffer(const Action& send,
                                                                  const OpContext& context) {
  PIPEPLAN_ASSIGN_OR_RETURN(std::span<std::byte> buffer, inner_->SendBuffer(send, context));
  if (armed_ && fault_.kind == FaultKind::kTruncate && context.step == fault_.step &&
      context.action_index == fault_.action_index) {
    return buffer.first(buffer.size() / 2);
  }
  return buffer;
}

}  // namespace pipeplan::runtime
