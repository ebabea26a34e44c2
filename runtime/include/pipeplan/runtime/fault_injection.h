// Fault injection: an executor decorator that makes one action of one rank fail, throw,
// stall, crash or send a malformed message, so the watchdog and the abort path can be seen
// at work (tests, 'pipeplan run --inject-fault', 'pipeplan-torch --inject-fault'). Everything
// else is the wrapped executor's.
#pragma once

#include <memory>
#include <string_view>

#include "pipeplan/model/plan.h"
#include "pipeplan/runtime/op_executor.h"

namespace pipeplan::runtime {

enum class FaultKind : uint8_t {
  kFail,      // Run returns an error
  kThrow,     // Run throws std::runtime_error
  kStall,     // Run blocks until the step is stopped, as a hung kernel would
  kCrash,     // the process exits at once, as a dying peer would (one process per rank only)
  kTruncate,  // a send (the action is a SEND) carries half its bytes: a malformed message
};

struct Fault {
  FaultKind kind = FaultKind::kFail;
  RankId rank;
  size_t action_index = 0;
  int step = 0;  // 0-based, warm-up steps included
};

// "stall@2:17" or "fail@1:5:3" (KIND@RANK:ACTION[:STEP]); errors say what is wrong.
// A crash exits with kCrashExitCode.
inline constexpr int kCrashExitCode = 86;
StatusOr<Fault> ParseFault(std::string_view text);

// The fault must hit a compute action of `plan` (a send for truncate) in one of the
// `total_steps` steps that run.
Status CheckFault(const Plan& plan, const Fault& fault, int total_steps);

class FaultInjectingExecutor final : public OpExecutor {
 public:
  // Injects `fault` when `rank` (the rank this executor serves) is the fault's rank.
  FaultInjectingExecutor(std::unique_ptr<OpExecutor> inner, RankId rank, const Fault& fault)
      : inner_(std::move(inner)), armed_(rank == fault.rank), fault_(fault) {}

  Status BeginStep(const OpContext& context) override { return inner_->BeginStep(context); }
  Status Run(const Action& action, const OpContext& context) override;
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send, const OpContext& context) override;
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv, const OpContext& context) override {
    return inner_->RecvBuffer(recv, context);
  }
  Status EndStep(const OpContext& context) override { return inner_->EndStep(context); }
  StatusOr<Verdict> Validate(const Action& pv, const OpContext& context) override;
  Status SendCompleted(const Action& send, const OpContext& context) override {
    return inner_->SendCompleted(send, context);
  }
  // The wrapped executor's own parts: faults hit the compute core only.
  OpMeter* meter() override { return inner_->meter(); }
  GradientExchange* gradient_exchange() override { return inner_->gradient_exchange(); }

 private:
  bool Hits(const OpContext& context) const;
  std::unique_ptr<OpExecutor> inner_;
  bool armed_;
  Fault fault_;
};

}  // namespace pipeplan::runtime
