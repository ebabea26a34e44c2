// The end of a step across ranks: dual placement's sum with the mirror rank, the
// gradient-state exchange, and the update it decides, made at once (synchronous) or
// speculatively and judged at the next step's PV (torch_executor.h).
#include <ATen/ATen.h>

#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/torch_ext/gradient_state.h"
#include "pipeplan/torch_ext/memory_meter.h"
#include "pipeplan/torch_ext/torch_executor.h"

namespace pipeplan::torch_ext {

bool TorchExecutor::UpdatesAsIs(const GlobalGradientState& state) const {
  return state.finite &&
         !(options_.clip_grad_norm > 0 && NeedsClipping(options_.clip_grad_norm, state.norm));
}

void TorchExecutor::Update(StepRecord& record, const GlobalGradientState& global) {
  record.global_grad_norm = global.norm;
  record.skipped = !global.finite;
  record.clipped = !record.skipped && options_.clip_grad_norm > 0 &&
                   ClipGradients(parameters_, options_.clip_grad_norm, global.norm);
  if (record.skipped) {
    optimizer_->ZeroGrads();
  } else {
    optimizer_->Step();
  }
}

// Ranks 0..r's state is known here (the last rank knows every rank's): when it already
// demands clipping or a skip the update waits for the verdict; otherwise it is made now, from
// a copy unless this is the last rank, whose decision is already the verdict.
Status TorchExecutor::Speculate(StepRecord record) {
  Speculation speculation{.record = record, .stepped = false, .undo = std::nullopt};
  if (UpdatesAsIs(SumGradientStates(gradient_states_.narrow(0, 0, rank_.value + 1)))) {
    if (rank_.value + 1 < map_.num_ranks()) {
      speculation.undo = optimizer_->Save();
      undo_bytes_ = std::max(undo_bytes_, speculation.undo->bytes());
    }
    optimizer_->Update();  // the grads stay until the verdict: a redo needs them
    speculation.stepped = true;
  }
  speculation_ = std::move(speculation);
  return Status::Ok();
}

StatusOr<runtime::Verdict> TorchExecutor::Validate(const Action& pv,
                                                   const runtime::OpContext& context) {
  PIPEPLAN_RETURN_IF_ERROR(Run(pv, context));
  if (!speculation_) return runtime::Verdict::kKept;  // the first step, or nothing exchanged
  Speculation speculation = *std::exchange(speculation_, std::nullopt);
  StepRecord& record = speculation.record;
  const bool last = rank_.value + 1 == map_.num_ranks();
  const GlobalGradientState global = SumGradientStates(last ? gradient_states_ : validation_table_);
  const bool exact = UpdatesAsIs(global);
  if (exact != speculation.stepped && (exact || last)) {
    return Internal("the verdict of step " + std::to_string(record.step + 1) +
                    " contradicts what this rank knew at its end");
  }
  if (exact) {
    optimizer_->ZeroGrads();
    record.global_grad_norm = global.norm;
    records_.push_back(record);
    PIPEPLAN_RETURN_IF_ERROR(ReportParameters(record.step + 1));
    return runtime::Verdict::kKept;
  }
  const MemoryMeter::Scope scope(meter_.get());
  if (speculation.stepped) {
    optimizer_->Restore(*speculation.undo);
    record.rolled_back = true;
  }
  Update(record, global);
  record.replayed_forwards = forwards_this_step_;
  // The discarded forwards' graphs go now; only their messages' buffers wait for the replay.
  for (auto& [key, state] : std::exchange(live_, {})) {
    Microbatch& kept = forgotten_[key];
    kept.output = std::move(state.output);
    kept.received_input = std::move(state.received_input);
  }
  losses_.clear();
  records_.push_back(record);
  PIPEPLAN_RETURN_IF_ERROR(ReportParameters(record.step + 1));
  return runtime::Verdict::kRedone;
}

bool TorchExecutor::ExchangesGradientState() const {
  return options_.clip_grad_norm > 0 || options_.inject_nonfinite.has_value();
}

StatusOr<std::span<std::byte>> TorchExecutor::GradientStateBuffer(
    RankId rank, const runtime::OpContext& context) {
  if (!ExchangesGradientState()) return FailedPrecondition("no gradient state is exchanged");
  if (rank.value < 0 || rank.value >= gradient_states_.size(0)) {
    return InvalidArgument("rank " + std::to_string(rank.value) + " is outside the plan's " +
                           std::to_string(gradient_states_.size(0)) + " ranks");
  }
  const MemoryMeter::Scope scope(meter_.get());
  at::Tensor row = gradient_states_[rank.value];
  if (rank == rank_) {
    InjectNonfinite(context.step);
    // One copy of each model stage: the two copies' gradients are equal (summed) by now.
    WriteLocalGradientState(first_copy_parameters_, row);
    own_state_written_ = true;
  }
  return BytesOf(row);
}

std::optional<RankId> TorchExecutor::GradientMirror() const {
  if (map_.chains() == 1) return std::nullopt;
  return RankId(map_.num_ranks() - 1 - rank_.value);
}

StatusOr<runtime::MirrorBuffers> TorchExecutor::MirrorGradientBuffers(
    const runtime::OpContext& /*context*/) {
  const MemoryMeter::Scope scope(meter_.get());
  mirror_send_ = FlattenGradients(mirror_parameters_, LocalLoss());
  mirror_receive_ = at::empty_like(mirror_send_);
  return runtime::MirrorBuffers{BytesOf(mirror_send_), BytesOf(mirror_receive_)};
}

Status TorchExecutor::MirrorReceived(const runtime::OpContext& /*context*/) {
  const MemoryMeter::Scope scope(meter_.get());
  mirror_loss_ = AddFlatGradients(mirror_receive_, mirror_parameters_);
  mirror_send_ = at::Tensor();
  mirror_receive_ = at::Tensor();
  return Status::Ok();
}

void TorchExecutor::InjectNonfinite(int step) {
  const std::optional<NonfiniteInjection>& injection = options_.inject_nonfinite;
  if (!injection || injection->step != step) return;
  StageModule* stage = Local(StageId(injection->stage));
  if (stage == nullptr) return;
  for (const at::Tensor& p : stage->parameters()) {
    if (p.grad().defined()) {
      p.grad().fill_(std::numeric_limits<double>::quiet_NaN());
    } else {
      p.mutable_grad() = at::full_like(p, std::numeric_limits<double>::quiet_NaN());
    }
  }
}

}  // namespace pipeplan::torch_ext
