#include "pipeplan/runtime/synthetic_executor.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include "comm_key.h"

#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace pipeplan::runtime {
namespace {

constexpr uint32_t kMagic = 0x50504d47;  // "PPMG"

// What every synthetic message starts with: who sent what, and when its data lands.
struct MessageHeader {
  uint32_t magic = kMagic;
  int32_t step = 0;
  uint32_t kind = 0;  // the SEND's ActionKind
  int32_t stage = 0;  // the sender's stage
  int32_t microbatch = 0;
  int32_t unused = 0;
  int64_t ready_at = 0;  // steady clock, nanoseconds since its epoch
};

int64_t Nanos(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// The message a compute part consumes from another rank: its RECV and what it must contain.
struct ExpectedInput {
  ActionKind recv;
  ActionKind send;
  StageId from;
};

std::optional<ExpectedInput> InputOf(const Action& part) {
  const std::optional<ActionKind> recv = InputReceiveOf(part.kind);
  if (!recv) return std::nullopt;
  if (*recv == ActionKind::kRecvForward) {
    return ExpectedInput{*recv, ActionKind::kSendForward, StageId(part.stage.value - 1)};
  }
  if (*recv == ActionKind::kRecvBackward) {
    return ExpectedInput{*recv, ActionKind::kSendBackward, StageId(part.stage.value + 1)};
  }
  return ExpectedInput{*recv, ActionKind::kSendPostValidation, part.stage};
}

std::string Describe(const MessageHeader& h) {
  return std::string(KindToken(static_cast<ActionKind>(h.kind))) + " of stage " +
         std::to_string(h.stage) + " microbatch " + std::to_string(h.microbatch) + " (step " +
         std::to_string(h.step) + ")";
}

}  // namespace

SyntheticExecutor::SyntheticExecutor(const Plan& plan, RankId rank, const SyntheticOptions& options)
    : plan_(plan),
      stages_(plan.request.topology),
      rank_(rank),
      options_(options),
      states_(static_cast<size_t>(stages_.num_ranks())) {
  options_.message_bytes = std::max(options_.message_bytes, sizeof(MessageHeader));
  if (rank.value < 0 || static_cast<size_t>(rank.value) >= plan.programs.size()) return;
  for (const Action& action : plan.programs[static_cast<size_t>(rank.value)].actions) {
    if (!IsComm(action.kind)) continue;
    slots_[CommKey(action.kind, action.stage, action.microbatch)].resize(options_.message_bytes);
  }
}

Status SyntheticExecutor::BeginStep(const OpContext& context) {
  step_ = context.step;
  spans_.clear();
  posted_.clear();
  free_since_ = Clock::now();
  return Status::Ok();
}

std::vector<std::byte>* SyntheticExecutor::Slot(ActionKind kind, StageId stage, MicrobatchId mb) {
  const auto found = slots_.find(CommKey(kind, stage, mb));
  return found == slots_.end() ? nullptr : &found->second;
}

StatusOr<std::span<std::byte>> SyntheticExecutor::SendBuffer(const Action& send,
                                                             const OpContext& context) {
  std::vector<std::byte>* slot = Slot(send.kind, send.stage, send.microbatch);
  if (slot == nullptr) return Internal("no buffer for " + ToString(send));
  double transfer = 0.0;
  if (send.kind == ActionKind::kSendForward) {
    transfer = plan_.request.costs.TransferTime(send.stage, StageId(send.stage.value + 1));
  } else if (send.kind == ActionKind::kSendBackward) {
    transfer = plan_.request.costs.TransferTime(send.stage, StageId(send.stage.value - 1));
  }
  MessageHeader header;
  header.step = step_;
  header.kind = static_cast<uint32_t>(send.kind);
  header.stage = send.stage.value;
  header.microbatch = send.microbatch.value;
  const TimePoint now = Clock::now();
  const TimePoint lands = AfterSeconds(now, transfer * options_.seconds_per_unit);
  header.ready_at = Nanos(lands);
  std::memcpy(slot->data(), &header, sizeof header);
  // As the simulator draws a SEND: from its post until its data lands.
  spans_.push_back({context.action_index, now, lands, kCommThread});
  return std::span<std::byte>(*slot);
}

StatusOr<std::span<std::byte>> SyntheticExecutor::RecvBuffer(const Action& recv,
                                                             const OpContext& context) {
  std::vector<std::byte>* slot = Slot(recv.kind, recv.stage, recv.microbatch);
  if (slot == nullptr) return Internal("no buffer for " + ToString(recv));
  posted_[CommKey(recv.kind, recv.stage, recv.microbatch)] = {context.action_index, Clock::now()};
  std::fill(slot->begin(), slot->end(), std::byte{0});  // a stale message must not pass
  return std::span<std::byte>(*slot);
}

Status SyntheticExecutor::CheckInput(const Action& part, TimePoint& ready) {
  const std::optional<ExpectedInput> input = InputOf(part);
  if (!input) return Status::Ok();
  const MicrobatchId mb =
      part.kind == ActionKind::kPostValidation ? MicrobatchId(0) : part.microbatch;
  const std::vector<std::byte>* slot = Slot(input->recv, part.stage, mb);
  if (slot == nullptr) return Status::Ok();  // a local hand-off, or the first stage
  MessageHeader got;
  std::memcpy(&got, slot->data(), sizeof got);
  MessageHeader want;
  want.step = step_;
  want.kind = static_cast<uint32_t>(input->send);
  want.stage = input->from.value;
  want.microbatch = mb.value;
  const bool same = got.magic == kMagic && got.step == want.step && got.kind == want.kind &&
                    (part.kind == ActionKind::kPostValidation || got.stage == want.stage) &&
                    got.microbatch == want.microbatch;
  if (!same) {
    return Internal("received " + (got.magic == kMagic ? Describe(got) : std::string("nothing")) +
                    " where " + Describe(want) + " was expected");
  }
  const TimePoint lands(std::chrono::nanoseconds(got.ready_at));
  ready = std::max(ready, lands);
  double overhead = 0.0;
  if (input->recv != ActionKind::kRecvPostValidation) {
    overhead = plan_.request.costs.ReceiveOverhead(input->from, part.stage);
    ready = std::max(ready, AfterSeconds(free_since_, overhead * options_.seconds_per_unit));
  }
  // As the simulator draws a RECV: from its post until its data lands, and for at least the
  // receive overhead.
  const auto posted = posted_.find(CommKey(input->recv, part.stage, mb));
  if (posted != posted_.end()) {
    const auto [index, at] = posted->second;
    spans_.push_back({index, at,
                      std::max(lands, AfterSeconds(at, overhead * options_.seconds_per_unit)),
                      kCommThread});
  }
  return Status::Ok();
}

Status SyntheticExecutor::Run(const Action& action, const OpContext& context) {
  TimePoint ready = Clock::now();
  if (action.kind == ActionKind::kOverlapFB) {
    for (const Action& part : action.sub_actions) PIPEPLAN_RETURN_IF_ERROR(CheckInput(part, ready));
  } else {
    PIPEPLAN_RETURN_IF_ERROR(CheckInput(action, ready));
  }
  const double duration = IsCompute(action.kind)
                              ? plan_.request.costs.ComputeTime(action) * options_.seconds_per_unit
                              : 0.0;
  const TimePoint end = AfterSeconds(ready, duration);
  PIPEPLAN_RETURN_IF_ERROR(HoldUntil(end, context));
  free_since_ = Clock::now();
  spans_.push_back({context.action_index, ready, free_since_});
  return Status::Ok();
}

StatusOr<Verdict> SyntheticExecutor::Validate(const Action& pv, const OpContext& context) {
  PIPEPLAN_RETURN_IF_ERROR(Run(pv, context));
  return context.step == options_.fail_validation_at ? Verdict::kRedone : Verdict::kKept;
}

Status SyntheticExecutor::EndStep(const OpContext& context) {
  if (options_.check_units <= 0 || context.speculative) return Status::Ok();
  const auto hold = std::chrono::duration<double>(options_.check_units * options_.seconds_per_unit);
  return HoldUntil(Clock::now() + std::chrono::duration_cast<Clock::duration>(hold), context);
}

// A row per rank (rank, step): its bytes travel, their content is not judged here.
StatusOr<std::span<std::byte>> SyntheticExecutor::GradientStateBuffer(RankId rank,
                                                                      const OpContext& context) {
  if (options_.check_units <= 0) return FailedPrecondition("no gradient state is exchanged");
  if (rank.value < 0 || rank.value >= stages_.num_ranks()) {
    return InvalidArgument("no rank " + std::to_string(rank.value));
  }
  std::array<double, 2>& row = states_[rank.value];
  if (rank == rank_) row = {double(rank_.value), double(context.step)};
  return std::span<std::byte>(std::as_writable_bytes(std::span(row)));
}

std::vector<OpSpan> SyntheticExecutor::TakeOpSpans() { return std::move(spans_); }

// A plain sleep wakes late by the timer slack (50 us by default on Linux) plus the scheduler's
// latency, and that adds up along the critical path; so the thread asks for no slack, sleeps
// until shortly before the end and yields its way to it.
Status SyntheticExecutor::HoldUntil(TimePoint until, const OpContext& context) {
  static thread_local const bool kNoSlack = [] {
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
    return true;
  }();
  (void)kNoSlack;
  constexpr auto kYieldPhase = std::chrono::microseconds(150);
  if (until - Clock::now() > kYieldPhase) {
    std::unique_lock lock(hold_mutex_);
    hold_.wait_until(lock, context.stop, until - kYieldPhase, [] { return false; });
  }
  while (Clock::now() < until && !context.stop.stop_requested()) std::this_thread::yield();
  if (context.stop.stop_requested()) return Aborted("the step was stopped");
  return Status::Ok();
}

}  // namespace pipeplan::runtime
