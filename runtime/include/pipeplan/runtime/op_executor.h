// OpExecutor: what runs the compute of one rank (a synthetic hold, LibTorch stages, ...).
// The runtime drives it through one step: BeginStep, then every compute action (F, B, I, W,
// F&B overlap) and post-validation in the plan's order, then (when its GradientExchange asks
// for them) the sum of the two model copies' gradients and the exchange of every rank's
// gradient state, then EndStep (the optimizer step). With post-validation that step may be
// speculative and undone at the next step's PV (Validate). After the step the runtime takes
// what the executor's OpMeter measured, if it has one. The executor owns every message
// buffer; same-rank stage hand-offs never reach the runtime.
//
// Three parts, so that an executor implements only what it does: the compute core
// (OpExecutor), an optional OpMeter (its own op times and memory) and an optional
// GradientExchange (what its optimizer needs of other ranks); `meter()` and
// `gradient_exchange()` return them, null where there are none. A call of one part never
// overlaps another call on the same executor.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <stop_token>
#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/runtime/clock.h"

namespace pipeplan::runtime {

// Where an executor call sits in the step. `stop` is requested when the step is aborted (a
// watchdog timeout, another rank's error): a long call must then return promptly.
struct OpContext {
  int step = 0;
  size_t action_index = 0;  // index in the rank's program; kNoAction for BeginStep and EndStep
  std::stop_token stop;
  // EndStep only: the next step's PV judges this update (Validate), so it may be made before
  // every rank's gradient state is known.
  bool speculative = false;
};

// Where an executor's gradients go to their mirror rank and where the mirror's land
// (OpExecutor::GradientMirror).
struct MirrorBuffers {
  std::span<std::byte> send;
  std::span<std::byte> receive;
};

// What a post-validation decided (OpExecutor::Validate).
enum class Verdict : uint8_t {
  kKept,    // the previous step's update stands; the step goes on
  kRedone,  // the update was undone and redone or skipped: the forwards run so far in this
            // step used weights that no longer hold and must run again
};

// Start and end of one op, as the executor measured it (e.g. CUDA events).
struct OpSpan {
  size_t action_index = 0;
  TimePoint start;
  TimePoint end;
  int thread = kComputeThread;  // the stream it ran on (timeline.h)
  bool discarded = false;       // a first run a failed post-validation replaced (timeline.h)
};

// Bytes the executor's allocator held around one compute action or receive: when it began,
// when it ended and the most in between (timeline.h's ActionMemory, in bytes).
struct OpMemory {
  size_t action_index = 0;
  ActionMemory bytes;
};

// What an executor measures of its own ops; the runtime takes it after each step.
class OpMeter {
 public:
  virtual ~OpMeter() = default;
  // Op times the executor measured itself during the step just ended; they replace the
  // runtime's host-clock times for those actions: around Run for compute, from post to the
  // transport's completion for a transfer (where the executor knows when its data landed).
  virtual std::vector<OpSpan> TakeOpSpans() { return {}; }
  // The memory of the step's compute actions (and post-validations) just ended, and of its
  // receives (what RecvBuffer allocated), where the executor measures it; the rank timeline
  // then counts bytes. Empty: not measured.
  virtual std::vector<OpMemory> TakeOpMemory() { return {}; }
  // What each of the rank's stages holds from step to step, in bytes (parameters, gradients,
  // optimizer state, its data): the part of the rank's static memory that moves with the stage
  // when another plan places it elsewhere. Asked after a step whose memory was measured.
  // Empty: not told.
  virtual std::vector<StageStatic> StageStaticBytes() { return {}; }
};

// What an executor's optimizer needs of other ranks' gradients before its step.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  // The gradient-state exchange, for optimizer decisions that need every rank's gradients
  // (clipping to a global norm, skipping a step whose gradients are not finite). When this
  // is true, after the last action and every transfer the runtime asks for one buffer per
  // rank: this rank's own, which then holds its state (its gradients are final), and one for
  // each other rank's. It sends its own to every other rank, receives theirs into theirs, and
  // then calls EndStep, which reads them all. Same size on every rank; the executor owns the
  // buffers (device memory where the transport needs it) and their format.
  virtual bool ExchangesGradientState() const { return false; }
  virtual StatusOr<std::span<std::byte>> GradientStateBuffer(RankId rank, const OpContext& context);
  // Dual placement (two copies of the model, DualPipe): the copies of one model stage sit on
  // two ranks, mirrors of each other, whose gradients must be added before the optimizer, as
  // DeepSeek's DualPipe all-reduces them. When GradientMirror() names a rank, after the last
  // action and every transfer, before the gradient-state exchange, the runtime sends
  // MirrorGradientBuffers().send to it, receives the mirror's into .receive (the same size;
  // the executor's format) and calls MirrorReceived, which adds them. Default: no mirror.
  virtual std::optional<RankId> GradientMirror() const { return std::nullopt; }
  virtual StatusOr<MirrorBuffers> MirrorGradientBuffers(const OpContext& context);
  virtual Status MirrorReceived(const OpContext& context);
};

class OpExecutor {
 public:
  virtual ~OpExecutor() = default;

  // Before the step's first action; the watchdog sees the rank inside it.
  virtual Status BeginStep(const OpContext& context) = 0;
  // Runs one compute action or a post-validation. The receives it consumes have completed.
  virtual Status Run(const Action& action, const OpContext& context) = 0;
  // The bytes a SEND transmits (valid until SendCompleted), after its producer has run.
  virtual StatusOr<std::span<std::byte>> SendBuffer(const Action& send,
                                                    const OpContext& context) = 0;
  // A SEND has completed: the runtime reads its buffer no more, and the executor may free
  // it. Called once per send, between ops: before the first compute op after the transport
  // says it completed (PendingOp::IsCompleted), else when the send is waited (at the latest
  // at the step's end, before EndStep). Default: nothing (buffers live until EndStep).
  virtual Status SendCompleted(const Action& /*send*/, const OpContext& /*context*/) {
    return Status::Ok();
  }
  // Where a RECV lands (valid until EndStep); read by the compute that consumes it.
  virtual StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv,
                                                    const OpContext& context) = 0;
  // After the last action and every transfer of the step: the optimizer step.
  virtual Status EndStep(const OpContext& context) = 0;
  // Post-validation (plans with PV). When the executor exchanges gradient state
  // (GradientExchange), every step but the run's last ends with it going along the ranks
  // instead: rank r receives the buffers of ranks 0..r-1 from rank r-1, asks for its own
  // (which writes it) and sends those of ranks 0..r to rank r+1; EndStep then runs
  // `speculative`. Those sends may still be in flight through the next step (steps without a
  // barrier): the executor leaves their buffers as they are until the runtime asks for them
  // again at that step's end. The next step's RECV_PV and SEND_PV carry the last rank's
  // complete state back to rank 0 (SendBuffer, RecvBuffer) and PV asks for the verdict. On
  // kRedone the executor has undone that update bit for bit, redone or skipped it, and
  // forgotten every forward of this step (their buffers stay valid until EndStep); the runtime
  // then takes the stale message of every receive tagged rollback that is still to come, and
  // runs the actions before the PV again. Default: Run(pv), then kKept.
  virtual StatusOr<Verdict> Validate(const Action& pv, const OpContext& context);

  // The optional parts, owned by the executor (usually the executor itself); null: none.
  virtual OpMeter* meter() { return nullptr; }
  virtual GradientExchange* gradient_exchange() { return nullptr; }
};

inline StatusOr<Verdict> OpExecutor::Validate(const Action& pv, const OpContext& context) {
  PIPEPLAN_RETURN_IF_ERROR(Run(pv, context));
  return Verdict::kKept;
}

inline StatusOr<MirrorBuffers> GradientExchange::MirrorGradientBuffers(
    const OpContext& /*context*/) {
  return FailedPrecondition("this executor has no gradient mirror");
}

inline Status GradientExchange::MirrorReceived(const OpContext& /*context*/) {
  return FailedPrecondition("this executor has no gradient mirror");
}

inline StatusOr<std::span<std::byte>> GradientExchange::GradientStateBuffer(
    RankId /*rank*/, const OpContext& /*context*/) {
  return FailedPrecondition("this executor exchanges no gradient state");
}

}  // namespace pipeplan::runtime
