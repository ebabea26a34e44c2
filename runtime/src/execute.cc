#include "pipeplan/runtime/execute.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "comm_key.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/simulation/timeline_metrics.h"

namespace pipeplan::runtime {
namespace {

// Calls into the executor with its exceptions turned into errors.
template <typename Call>
auto Guarded(Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return Internal(std::string("the executor threw: ") + e.what());
  } catch (...) {
    return Internal("the executor threw a non-standard exception");
  }
}

bool IsValidationComm(ActionKind kind) {
  return kind == ActionKind::kRecvPostValidation || kind == ActionKind::kSendPostValidation;
}

const Status& StatusOf(const Status& status) { return status; }
template <typename T>
Status StatusOf(const StatusOr<T>& result) {
  return result.status();
}

class StepRunner {
 public:
  StepRunner(const PreparedProgram& prepared, OpExecutor& executor, Transport& transport,
             const StepOptions& options)
      : prepared_(prepared),
        actions_(prepared.program().actions),
        executor_(executor),
        meter_(executor.meter()),
        gradients_(executor.gradient_exchange()),
        transport_(transport),
        options_(options),
        timer_(options.timer != nullptr ? *options.timer : host_timer_),
        pending_(actions_.size()) {
    timeline_.rank = prepared.program().rank;
    timeline_.actions.resize(actions_.size());
    timeline_.clock = timer_.clock();
  }

  StatusOr<RankTimeline> Run() {
    const Status status = RunActions();
    Publish(Activity::kDone, kNoAction);
    if (!status.ok()) {
      // The diagnosis goes out before the stop, so that a peer learns why and not just that the
      // step was stopped; an abort that reached us from elsewhere is passed on unchanged.
      transport_.Abort(status);
      options_.stop.request_stop();
      return status;
    }
    return std::move(timeline_);
  }

 private:
  Status RunActions() {
    Publish(Activity::kBeginning, kNoAction);
    PIPEPLAN_RETURN_IF_ERROR(
        AtStepLevel(OnDevice([&] { return executor_.BeginStep(Context(kNoAction)); })));
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(timer_.BeginStep(actions_.size())));
    PIPEPLAN_RETURN_IF_ERROR(RunRange(0, actions_.size()));
    for (size_t i = 0; i < actions_.size(); ++i) {
      if (pending_[i]) PIPEPLAN_RETURN_IF_ERROR(WaitTransfer(i, kNoAction, Activity::kFinishing));
    }
    if (const std::optional<RankId> mirror =
            gradients_ != nullptr ? gradients_->GradientMirror() : std::nullopt) {
      PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(SumWithMirror(*mirror)));
    }
    const bool speculative = prepared_.validation() != kNoAction && !options_.last_step;
    if (gradients_ != nullptr && gradients_->ExchangesGradientState()) {
      PIPEPLAN_RETURN_IF_ERROR(
          AtStepLevel(speculative ? PassGradientStateOn() : ExchangeGradientState()));
    }
    Publish(Activity::kEnding, kNoAction);
    OpContext end = Context(kNoAction);
    end.speculative = speculative;
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(OnDevice([&] { return executor_.EndStep(end); })));
    StatusOr<std::vector<OpSpan>> timed = timer_.Resolve();
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(timed.status()));
    Record(*timed);
    return meter_ != nullptr ? TakeMeasured() : Status::Ok();
  }

  // What the executor's meter measured of the step just ended.
  Status TakeMeasured() {
    StatusOr<std::vector<OpSpan>> modelled =
        OnDevice([&]() -> StatusOr<std::vector<OpSpan>> { return meter_->TakeOpSpans(); });
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(modelled.status()));
    Record(*modelled);
    StatusOr<std::vector<OpMemory>> memory =
        OnDevice([&]() -> StatusOr<std::vector<OpMemory>> { return meter_->TakeOpMemory(); });
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(memory.status()));
    RecordMemory(*memory);
    if (memory->empty()) return Status::Ok();
    StatusOr<std::vector<StageStatic>> stage_static = OnDevice(
        [&]() -> StatusOr<std::vector<StageStatic>> { return meter_->StageStaticBytes(); });
    PIPEPLAN_RETURN_IF_ERROR(AtStepLevel(stage_static.status()));
    timeline_.stage_static = std::move(*stage_static);
    return Status::Ok();
  }

  // An action the executor did not measure (a transfer) holds what the rank held when it was
  // reached: the last measured end before it, or the first measured start.
  void RecordMemory(const std::vector<OpMemory>& measured) {
    if (measured.empty()) return;
    std::vector<std::optional<ActionMemory>> by_index(actions_.size());
    for (const OpMemory& m : measured) {
      if (m.action_index < actions_.size()) by_index[m.action_index] = m.bytes;
    }
    double held = measured.front().bytes.start;
    for (const std::optional<ActionMemory>& m : by_index) {
      if (m) {
        held = m->start;
        break;
      }
    }
    timeline_.memory_unit = MemoryUnit::kBytes;
    timeline_.action_memory.resize(actions_.size());
    for (size_t i = 0; i < actions_.size(); ++i) {
      if (by_index[i]) {
        timeline_.action_memory[i] = *by_index[i];
        held = by_index[i]->end;
      } else {
        timeline_.action_memory[i] = {.start = held, .end = held, .peak = held};
      }
    }
    SummarizeMeasuredMemory(prepared_.program(), timeline_);
  }

  void Record(const std::vector<OpSpan>& spans) {
    for (const OpSpan& span : spans) {
      if (span.action_index >= actions_.size()) continue;
      const ActionTiming timing{Since(span.start), Since(span.end), span.thread};
      if (span.discarded) {
        timeline_.discarded.push_back({span.action_index, timing});
      } else {
        timeline_.actions[span.action_index] = timing;
      }
    }
  }

  // Every transfer of the step has completed on this rank, so the next message between any
  // two ranks is this one: a group of one send to and one receive from every other rank.
  Status ExchangeGradientState() {
    Publish(Activity::kExchanging, kNoAction);
    PIPEPLAN_RETURN_IF_ERROR(WaitStateSends());
    const RankId self = timeline_.rank;
    PIPEPLAN_ASSIGN_OR_RETURN(const std::span<std::byte> own, StateBuffer(self));
    std::vector<P2POp> ops;
    for (int r = 0; r < transport_.world_size(); ++r) {
      if (r == self.value) continue;
      PIPEPLAN_ASSIGN_OR_RETURN(const std::span<std::byte> theirs, StateBuffer(RankId(r)));
      if (theirs.size() != own.size()) {
        return Internal("the executor's gradient-state buffers differ in size (" +
                        std::to_string(own.size()) + " and " + std::to_string(theirs.size()) +
                        " bytes)");
      }
      ops.push_back({P2PKind::kSend, RankId(r), own});
      ops.push_back({P2PKind::kRecv, RankId(r), theirs});
    }
    return PostAndWait(ops);
  }

  // Like the gradient-state exchange, the next message between this rank and its mirror.
  Status SumWithMirror(RankId mirror) {
    Publish(Activity::kMirroring, kNoAction, static_cast<size_t>(mirror.value));
    StatusOr<MirrorBuffers> buffers = OnDevice([&]() -> StatusOr<MirrorBuffers> {
      return gradients_->MirrorGradientBuffers(Context(kNoAction));
    });
    if (!buffers.ok()) {
      return buffers.status().WithContext("the gradients for mirror rank " +
                                          std::to_string(mirror.value));
    }
    if (buffers->send.size() != buffers->receive.size()) {
      return Internal("the executor's mirror buffers differ in size (" +
                      std::to_string(buffers->send.size()) + " and " +
                      std::to_string(buffers->receive.size()) + " bytes)");
    }
    PIPEPLAN_RETURN_IF_ERROR(PostAndWait(
        {{P2PKind::kSend, mirror, buffers->send}, {P2PKind::kRecv, mirror, buffers->receive}}));
    return OnDevice([&] { return gradients_->MirrorReceived(Context(kNoAction)); });
  }

  // Runs actions [begin, end) in order: comm groups posted (a group cut at `end`), compute
  // after its receives.
  Status RunRange(size_t begin, size_t end) {
    for (size_t i = begin; i < end;) {
      if (options_.stop.stop_requested()) return Aborted("the step was stopped");
      if (IsComm(actions_[i].kind)) {
        for (size_t input : prepared_.InputsOf(i)) {  // a SEND_PV forwards what RECV_PV got
          if (pending_[input]) PIPEPLAN_RETURN_IF_ERROR(WaitTransfer(input, i, Activity::kWaiting));
        }
        const size_t group_end = std::min(prepared_.GroupEnd(i), end);
        PIPEPLAN_RETURN_IF_ERROR(PostGroup(i, group_end));
        i = group_end;
        continue;
      }
      PIPEPLAN_RETURN_IF_ERROR(i == prepared_.validation() ? RunValidation(i) : RunCompute(i));
      ++i;
    }
    return Status::Ok();
  }

  // A failed verdict: the stale messages still to come are taken (so that no sender's
  // speculative send is left hanging), then everything before the PV runs again on the
  // corrected weights. All ranks get the same verdict, so the senders replay too.
  Status RunValidation(size_t index) {
    PIPEPLAN_ASSIGN_OR_RETURN(const Verdict verdict, RunTimed(index, [&] {
                                return executor_.Validate(actions_[index], Context(index));
                              }));
    if (verdict == Verdict::kKept) return Status::Ok();
    PIPEPLAN_RETURN_IF_ERROR(DrainRollbacks(index));
    timer_.Replaying(prepared_.replay_end());
    return RunRange(0, prepared_.replay_end());
  }

  Status DrainRollbacks(size_t validation) {
    std::vector<P2POp> ops;
    std::vector<size_t> drained;
    for (size_t i = validation + 1; i < actions_.size(); ++i) {
      const Action& action = actions_[i];
      if (action.kind != ActionKind::kRecvForward || !action.rollback) continue;
      StatusOr<std::span<std::byte>> buffer = OnDevice([&]() -> StatusOr<std::span<std::byte>> {
        return executor_.RecvBuffer(action, Context(i));
      });
      if (!buffer.ok()) return AtAction(i, buffer.status());
      ops.push_back({P2PKind::kRecv, action.peer, *buffer});
      drained.push_back(i);
    }
    if (ops.empty()) return Status::Ok();
    auto handles = transport_.Post(ops);
    if (!handles.ok()) return AtAction(validation, handles.status());
    for (size_t k = 0; k < drained.size(); ++k) {
      Publish(Activity::kWaiting, validation, drained[k]);
      const Status status = (*handles)[k]->Wait(TimePoint::max());
      if (!status.ok()) return AtAction(drained[k], status);
    }
    return Status::Ok();
  }

  // Post-validation's end of step: ranks 0..r-1's states arrive from rank r-1 and ranks 0..r's
  // go on to rank r+1, so the last rank holds them all (the next step's PV chain brings them
  // back). Without a step barrier the sends are not waited here (StepOptions::state_sends).
  Status PassGradientStateOn() {
    Publish(Activity::kExchanging, kNoAction);
    PIPEPLAN_RETURN_IF_ERROR(WaitStateSends());
    const int self = timeline_.rank.value;
    std::vector<P2POp> receives;
    for (int r = 0; r < self; ++r) {
      PIPEPLAN_ASSIGN_OR_RETURN(const std::span<std::byte> row, StateBuffer(RankId(r)));
      receives.push_back({P2PKind::kRecv, RankId(self - 1), row});
    }
    PIPEPLAN_RETURN_IF_ERROR(PostAndWait(receives));
    std::vector<P2POp> sends;
    for (int r = 0; r <= self && self + 1 < transport_.world_size(); ++r) {
      PIPEPLAN_ASSIGN_OR_RETURN(const std::span<std::byte> row, StateBuffer(RankId(r)));
      sends.push_back({P2PKind::kSend, RankId(self + 1), row});
    }
    if (sends.empty()) return StateBuffer(timeline_.rank).status();  // writes the own state
    if (options_.state_sends == nullptr) return PostAndWait(sends);
    PIPEPLAN_ASSIGN_OR_RETURN(*options_.state_sends, transport_.Post(sends));
    return Status::Ok();
  }

  // The previous step's state sends, before their buffers are written again.
  Status WaitStateSends() const {
    if (options_.state_sends == nullptr) return Status::Ok();
    for (const std::unique_ptr<PendingOp>& send : *options_.state_sends) {
      PIPEPLAN_RETURN_IF_ERROR(send->Wait(TimePoint::max()));
    }
    options_.state_sends->clear();
    return Status::Ok();
  }

  StatusOr<std::span<std::byte>> StateBuffer(RankId rank) {
    StatusOr<std::span<std::byte>> found = OnDevice([&]() -> StatusOr<std::span<std::byte>> {
      return gradients_->GradientStateBuffer(rank, Context(kNoAction));
    });
    if (!found.ok()) {
      return found.status().WithContext("the gradient state of rank " + std::to_string(rank.value));
    }
    return found;
  }

  Status PostAndWait(const std::vector<P2POp>& ops) {
    if (ops.empty()) return Status::Ok();
    PIPEPLAN_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<PendingOp>> handles,
                              transport_.Post(ops));
    for (const std::unique_ptr<PendingOp>& handle : handles) {
      PIPEPLAN_RETURN_IF_ERROR(handle->Wait(TimePoint::max()));
    }
    return Status::Ok();
  }

  Status PostGroup(size_t begin, size_t end) {
    std::vector<P2POp> ops;
    ops.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const Action& action = actions_[i];
      const bool send = IsSend(action.kind);
      // Posted again by a replay: the first message must have landed before its buffer is
      // handed out again.
      if (pending_[i]) PIPEPLAN_RETURN_IF_ERROR(WaitTransfer(i, i, Activity::kWaiting));
      Publish(Activity::kRunning, i);
      StatusOr<std::span<std::byte>> buffer = OnDevice([&]() -> StatusOr<std::span<std::byte>> {
        return send ? executor_.SendBuffer(action, Context(i))
                    : executor_.RecvBuffer(action, Context(i));
      });
      if (!buffer.ok()) return AtAction(i, buffer.status());
      ops.push_back({send ? P2PKind::kSend : P2PKind::kRecv, action.peer, *buffer});
    }
    PIPEPLAN_RETURN_IF_ERROR(AtAction(begin, timer_.GroupPosting(begin, end)));
    auto handles = transport_.Post(ops);
    if (!handles.ok()) return AtAction(begin, handles.status());
    for (size_t i = begin; i < end; ++i) {
      pending_[i] = std::move((*handles)[i - begin]);
      if (IsSend(actions_[i].kind)) sends_in_flight_.push_back(i);
    }
    return AtAction(begin, timer_.GroupPosted(begin, end));
  }

  Status RunCompute(size_t index) {
    return RunTimed(index, [&] { return executor_.Run(actions_[index], Context(index)); });
  }

  // Waits the receives compute action `index` consumes, then times `call` as that action.
  template <typename Call>
  auto RunTimed(size_t index, Call&& call) -> decltype(call()) {
    for (size_t input : prepared_.InputsOf(index)) {
      if (pending_[input]) PIPEPLAN_RETURN_IF_ERROR(WaitTransfer(input, index, Activity::kWaiting));
    }
    // After the inputs: what they causally follow (a peer's use of a gradient sent) is done.
    PIPEPLAN_RETURN_IF_ERROR(FinishCompletedSends());
    Publish(Activity::kRunning, index);
    // On a shared device the marks are inside the hold too: no other rank's work between them.
    const std::unique_lock device = HoldDevice();
    PIPEPLAN_RETURN_IF_ERROR(AtAction(index, timer_.ComputeBegins(index)));
    auto result = Guarded(call);
    if (!result.ok()) return AtAction(index, StatusOf(result));
    PIPEPLAN_RETURN_IF_ERROR(AtAction(index, timer_.ComputeEnded(index)));
    return result;
  }

  Status WaitTransfer(size_t transfer, size_t waiter, Activity activity) {
    Publish(activity, waiter, transfer);
    const Status status = pending_[transfer]->Wait(TimePoint::max());
    if (!status.ok()) return AtAction(transfer, status);
    timer_.Landed(transfer, pending_[transfer]->completed_at());
    pending_[transfer].reset();
    if (!IsSend(actions_[transfer].kind)) return Status::Ok();
    // The executor may free what was sent: a gradient need not wait for the step's end.
    std::erase(sends_in_flight_, transfer);
    return AtAction(transfer, OnDevice([&] {
                      return executor_.SendCompleted(actions_[transfer], Context(transfer));
                    }));
  }

  // Sends the transport says have completed, finished before the next compute op.
  Status FinishCompletedSends() {
    for (size_t k = 0; k < sends_in_flight_.size();) {
      const size_t send = sends_in_flight_[k];
      if (!pending_[send]->IsCompleted()) {
        ++k;
        continue;
      }
      PIPEPLAN_RETURN_IF_ERROR(WaitTransfer(send, send, Activity::kWaiting));
    }
    return Status::Ok();
  }

  // Errors from elsewhere (an abort) keep their message; our own get the rank and action.
  Status AtAction(size_t index, const Status& status) const {
    if (status.code() == StatusCode::kAborted) return status;
    return status.WithContext(Where(timeline_.rank.value, index, actions_[index]));
  }
  Status AtStepLevel(const Status& status) const {
    if (status.ok() || status.code() == StatusCode::kAborted) return status;
    return status.WithContext("rank " + std::to_string(timeline_.rank.value) + ", step " +
                              std::to_string(options_.step));
  }

  // Ranks that share one device (StepOptions::shared_device) take turns: one op at a time.
  std::unique_lock<std::mutex> HoldDevice() const {
    if (options_.shared_device == nullptr) return {};
    return std::unique_lock(*options_.shared_device);
  }

  // A call into the executor: on the device while it holds it, its exceptions made errors.
  template <typename Call>
  auto OnDevice(Call&& call) -> decltype(call()) {
    const std::unique_lock device = HoldDevice();
    return Guarded(std::forward<Call>(call));
  }

  OpContext Context(size_t index) const {
    return {options_.step, index, options_.stop.get_token()};
  }
  double Since(TimePoint t) const {
    return SecondsBetween(options_.epoch, t) / options_.seconds_per_unit;
  }
  void Publish(Activity activity, size_t index, size_t waited = kNoAction) const {
    if (options_.progress != nullptr) options_.progress->Set(activity, index, waited);
  }

  const PreparedProgram& prepared_;
  const std::vector<Action>& actions_;
  OpExecutor& executor_;
  OpMeter* meter_;               // null: the executor measures nothing itself
  GradientExchange* gradients_;  // null: no mirror, no gradient state
  Transport& transport_;
  const StepOptions& options_;
  HostOpTimer host_timer_;  // when the options name no timer
  OpTimer& timer_;
  std::vector<std::unique_ptr<PendingOp>> pending_;  // posted, not yet waited, by action index
  std::vector<size_t> sends_in_flight_;              // the sends among them, in posting order
  RankTimeline timeline_;
};

// A failed post-validation replays every forward sent before the sender's PV; its receiver
// knows to take the stale message first only where the receive is tagged rollback.
Status CheckReplayable(const Plan& plan) {
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    const PreparedProgram prepared(plan.programs[r]);
    if (prepared.validation() == kNoAction) continue;
    for (size_t index = 0; index < prepared.validation(); ++index) {
      const Action& action = actions[index];
      if (index < prepared.replay_end() && IsValidationComm(action.kind)) {
        return FailedPrecondition(Where(static_cast<int>(r), index, action) +
                                  ": must come right before its rank's PV, since a failed "
                                  "validation runs every action before them again");
      }
      if (action.kind != ActionKind::kSendForward) continue;
      const int peer = action.peer.value;
      const bool tagged = peer >= 0 && peer < static_cast<int>(plan.programs.size()) &&
                          std::any_of(plan.programs[peer].actions.begin(),
                                      plan.programs[peer].actions.end(), [&](const Action& a) {
                                        return a.kind == ActionKind::kRecvForward && a.rollback &&
                                               a.stage.value == action.stage.value + 1 &&
                                               a.microbatch == action.microbatch;
                                      });
      if (!tagged) {
        return FailedPrecondition(
            Where(static_cast<int>(r), index, action) +
            ": sent before this rank's PV to a receive not tagged rollback, so a failed "
            "validation could not be replayed");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckBeforeLaunch(const Plan& plan) {
  Status status = ValidatePlan(plan);
  if (status.ok()) status = CheckReplayable(plan);
  if (status.ok()) return status;
  return FailedPrecondition("refusing to launch an invalid plan: " + status.message());
}

PreparedProgram::PreparedProgram(const RankProgram& program)
    : program_(&program),
      validation_(kNoAction),
      replay_end_(kNoAction),
      inputs_(program.actions.size()),
      group_end_(program.actions.size()) {
  const std::vector<Action>& actions = program.actions;
  std::unordered_map<uint64_t, size_t> unconsumed;  // receive key -> its index
  std::vector<size_t> validation_inputs;            // RECV_PV before the next PV
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& action = actions[i];
    if (action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward) {
      unconsumed[CommKey(action.kind, action.stage, action.microbatch)] = i;
    } else if (action.kind == ActionKind::kRecvPostValidation) {
      validation_inputs.push_back(i);
    } else if (action.kind == ActionKind::kSendPostValidation) {
      inputs_[i] = validation_inputs;  // forwards the state it received
    } else if (action.kind == ActionKind::kPostValidation) {
      inputs_[i] = std::move(validation_inputs);
      validation_inputs.clear();
      validation_ = i;
    } else if (IsCompute(action.kind)) {
      auto consume = [&](const Action& part) {
        const std::optional<ActionKind> input = InputReceiveOf(part.kind);
        if (!input) return;
        const auto found = unconsumed.find(CommKey(*input, part.stage, part.microbatch));
        if (found == unconsumed.end()) return;  // a local hand-off, or the first stage
        inputs_[i].push_back(found->second);
        unconsumed.erase(found);
      };
      if (action.kind != ActionKind::kOverlapFB) {
        consume(action);
      } else {
        for (const Action& part : action.sub_actions) consume(part);
      }
    }
  }
  for (size_t i = actions.size(); i-- > 0;) {
    const bool comm = IsComm(actions[i].kind);
    // A SEND_PV opens a group of its own: it waits for its RECV_PV.
    const bool next_joins =
        i + 1 < actions.size() && IsComm(actions[i + 1].kind) && inputs_[i + 1].empty();
    group_end_[i] = comm ? (next_joins ? group_end_[i + 1] : i + 1) : i;
  }
  replay_end_ = validation_;
  while (replay_end_ != kNoAction && replay_end_ > 0 &&
         IsValidationComm(actions[replay_end_ - 1].kind)) {
    --replay_end_;
  }
}

StatusOr<RankTimeline> ExecuteStep(const PreparedProgram& program, OpExecutor& executor,
                                   Transport& transport, const StepOptions& options) {
  return StepRunner(program, executor, transport, options).Run();
}

}  // namespace pipeplan::runtime
