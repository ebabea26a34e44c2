#include "pipeplan/torch_ext/torch_executor.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "pipeplan/torch_ext/gradient_state.h"
#include "pipeplan/torch_ext/memory_meter.h"
#include "pipeplan/torch_ext/scripted_stage.h"

namespace pipeplan::torch_ext {
namespace {

bool SplitsBackward(const Action& action) {
  return action.kind == ActionKind::kBackwardInput ||
         std::any_of(action.sub_actions.begin(), action.sub_actions.end(),
                     [](const Action& part) { return SplitsBackward(part); });
}

bool SplitsBackward(const std::vector<Action>& program) {
  return std::any_of(program.begin(), program.end(),
                     [](const Action& action) { return SplitsBackward(action); });
}

std::string Name(StageId stage, MicrobatchId mb) {
  return "stage " + std::to_string(stage.value) + " microbatch " + std::to_string(mb.value);
}

std::string ShapeOf(const at::Tensor& t) {
  std::string shape = "[";
  for (const int64_t size : t.sizes()) {
    shape += (shape.size() > 1 ? ", " : "") + std::to_string(size);
  }
  return shape + "]";
}

// This rank's stages, in chunk order: the built-in transformer or the user's modules.
StatusOr<std::vector<std::unique_ptr<StageModule>>> MakeStages(const StageMap& map, RankId rank,
                                                               const TorchExecutorOptions& options,
                                                               at::Device device) {
  std::vector<std::unique_ptr<StageModule>> stages;
  for (const StageId stage : map.StagesOf(rank)) {
    // Dual placement's second copy is built from the same weights (or module) as the first.
    const int depth = map.DepthOf(stage);
    if (options.stage_modules.empty()) {
      stages.push_back(
          std::make_unique<TransformerStage>(options.model, stage.value, depth, device));
      continue;
    }
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::unique_ptr<ScriptedStage> scripted,
        ScriptedStage::Load(ScriptedStagePath(options.stage_modules, depth), stage.value, device));
    stages.push_back(std::move(scripted));
  }
  return stages;
}

}  // namespace

std::span<std::byte> TorchExecutor::BytesOf(const at::Tensor& t) {
  return {static_cast<std::byte*>(t.data_ptr()), t.nbytes()};
}

StatusOr<std::unique_ptr<TorchExecutor>> TorchExecutor::Create(
    const Plan& plan, RankId rank, const TorchExecutorOptions& options) {
  PIPEPLAN_RETURN_IF_ERROR(ValidateModelConfig(options.model));
  const Topology& topology = plan.request.topology;
  if (topology.placement == Placement::kDual && topology.ranks % 2 != 0) {
    return InvalidArgument("dual placement on " + std::to_string(topology.ranks) +
                           " ranks puts both copies of the middle stage on one rank, which the "
                           "torch executor does not run; use an even number of ranks");
  }
  if (rank.value < 0 || rank.value >= topology.ranks) {
    return InvalidArgument("rank " + std::to_string(rank.value) + " is outside the plan's " +
                           std::to_string(topology.ranks) + " ranks");
  }
  std::optional<at::Device> device;
  try {
    device = at::Device(options.device);
  } catch (const std::exception&) {
    return InvalidArgument("unknown device '" + options.device + "' (expected cpu or cuda:N)");
  }
  try {
    return Build(plan, rank, options, *device);
  } catch (const std::exception& e) {
    return Internal("rank " + std::to_string(rank.value) + " could not set up its stages on " +
                    options.device + ": " + e.what());
  }
}

StatusOr<std::unique_ptr<TorchExecutor>> TorchExecutor::Build(const Plan& plan, RankId rank,
                                                              const TorchExecutorOptions& options,
                                                              const at::Device& device) {
  std::unique_ptr<MemoryMeter> meter;
  if (options.count_memory && options.memory_in_turns) {
    PIPEPLAN_ASSIGN_OR_RETURN(std::shared_ptr<MemoryMeter> whole, DeviceMeter(device));
    meter = MakeTurnMeter(std::move(whole));
  } else if (options.count_memory) {
    PIPEPLAN_ASSIGN_OR_RETURN(meter, MakeMemoryMeter(device));
  }
  // The parameters, optimizer and data are this rank's memory too.
  const MemoryMeter::Scope scope(meter.get());
  PIPEPLAN_ASSIGN_OR_RETURN(auto stages,
                            MakeStages(StageMap(plan.request.topology), rank, options, device));
  return std::unique_ptr<TorchExecutor>(
      new TorchExecutor(plan, rank, options, std::move(stages), std::move(meter)));
}

TorchExecutor::TorchExecutor(const Plan& plan, RankId rank, const TorchExecutorOptions& options,
                             std::vector<std::unique_ptr<StageModule>> stages,
                             std::unique_ptr<MemoryMeter> meter)
    : map_(plan.request.topology),
      rank_(rank),
      microbatches_(plan.request.topology.microbatches),
      options_(options),
      device_(options.device),
      stages_(std::move(stages)),
      meter_(std::move(meter)),
      splits_backward_(SplitsBackward(plan.programs.at(rank.value).actions)),
      last_loss_(std::numeric_limits<double>::quiet_NaN()) {
  for (const auto& stage : stages_) {
    parameters_.insert(parameters_.end(), stage->parameters().begin(), stage->parameters().end());
    if (map_.ChainOf(StageId(stage->stage())) == 0) {
      first_copy_parameters_.insert(first_copy_parameters_.end(), stage->parameters().begin(),
                                    stage->parameters().end());
    }
  }
  // The mirror holds the same model stages: by depth, the two lists line up.
  std::vector<const StageModule*> by_depth;
  for (const auto& stage : stages_) by_depth.push_back(stage.get());
  std::ranges::sort(by_depth, {},
                    [&](const StageModule* s) { return map_.DepthOf(StageId(s->stage())); });
  for (const StageModule* stage : by_depth) {
    mirror_parameters_.insert(mirror_parameters_.end(), stage->parameters().begin(),
                              stage->parameters().end());
  }
  optimizer_ = MakeOptimizer(parameters_, options.optimizer);
  const auto table = at::TensorOptions().dtype(at::kDouble).device(device_);
  gradient_states_ = at::zeros({plan.request.topology.ranks, kGradientStateValues}, table);
  validation_table_ = at::zeros_like(gradient_states_);
  LoadData();
}

StageModule* TorchExecutor::Local(StageId stage) {
  for (const auto& s : stages_) {
    if (s->stage() == stage.value) return s.get();
  }
  return nullptr;
}

bool TorchExecutor::OnThisRank(int stage) const {
  return stage >= 0 && stage < map_.num_stages() && map_.RankOf(StageId(stage)) == rank_;
}

at::Tensor TorchExecutor::EmptyActivation() const {
  const ModelConfig& m = options_.model;
  return at::empty({m.microbatch_size, m.sequence, m.hidden},
                   at::TensorOptions().dtype(at::kFloat).device(device_));
}

StatusOr<TorchExecutor::Microbatch*> TorchExecutor::Find(StageId stage, MicrobatchId mb,
                                                         const char* needed_by) {
  const auto it = live_.find({stage.value, mb.value});
  if (it == live_.end()) {
    return FailedPrecondition(std::string(needed_by) + " of " + Name(stage, mb) +
                              " found nothing to work on (its forward has not run)");
  }
  return &it->second;
}

void TorchExecutor::LoadData() {
  for (const StageId stage : map_.StagesOf(rank_)) {
    for (int mb = 0; mb < map_.MicrobatchesOf(stage); ++mb) {
      const int sample = map_.BatchMicrobatchOf(stage, MicrobatchId(mb));
      if (map_.IsFirst(stage)) {
        inputs_[stage.value].push_back(MicrobatchInput(options_.model, sample, device_));
      }
      if (map_.IsLast(stage)) {
        targets_[stage.value].push_back(MicrobatchTarget(options_.model, sample, device_));
      }
    }
  }
}

Status TorchExecutor::BeginStep(const runtime::OpContext& /*context*/) {
  const MemoryMeter::Scope scope(meter_.get());
  memory_.clear();
  live_.clear();
  losses_.clear();
  mirror_loss_ = 0.0;
  forwards_this_step_ = 0;
  if (!initial_parameters_reported_) {
    initial_parameters_reported_ = true;
    return ReportParameters(0);
  }
  return Status::Ok();
}

Status TorchExecutor::ReportParameters(int step) {
  if (!options_.on_parameters) return Status::Ok();
  std::vector<StageParameters> all;
  size_t index = 0;  // into parameters_, the optimizer's order
  for (const auto& stage : stages_) {
    StageParameters s{.stage = stage->stage(),
                      .names = &stage->parameter_names(),
                      .params = stage->parameters(),
                      .optimizer_state = {},
                      .optimizer_step = optimizer_->steps()};
    for (size_t i = 0; i < s.params.size(); ++i) {
      s.optimizer_state.push_back(optimizer_->StateOf(index++));
    }
    all.push_back(std::move(s));
  }
  return options_.on_parameters(step, all);
}

Status TorchExecutor::Forward(StageId stage, MicrobatchId mb) {
  StageModule* model = Local(stage);
  if (model == nullptr) return InvalidArgument(Name(stage, mb) + " is not on this rank");
  Microbatch& state = live_[{stage.value, mb.value}];
  ++forwards_this_step_;
  at::Tensor input;
  if (map_.IsFirst(stage)) {
    input = inputs_.at(stage.value).at(mb.value).clone();
  } else if (OnThisRank(stage.value - 1)) {
    PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * previous, Find(StageId(stage.value - 1), mb, "F"));
    input = previous->output;
  } else {
    input = state.received_input;
  }
  if (!input.defined()) {
    return FailedPrecondition("F of " + Name(stage, mb) + " has no input: its RECV_F did not run");
  }
  // The first stage's input is data: a full backward that took its gradient, which goes
  // nowhere, would run one GEMM more per microbatch. An I/W split cuts the graph at the input,
  // so under one it stays a leaf that needs it.
  const bool input_needs_grad = !map_.IsFirst(stage) || splits_backward_;
  state.input = input.detach().requires_grad_(input_needs_grad);
  const at::Tensor output = model->Forward(state.input, &state.stash);
  // Every message between stages, and the loss's target, has the activation's shape.
  const at::Tensor expected = EmptyActivation();
  if (output.sizes() != expected.sizes()) {
    return InvalidArgument("F of " + Name(stage, mb) + " produced shape " + ShapeOf(output) +
                           "; stage outputs must be " + ShapeOf(expected) +
                           " ([microbatch size, sequence, hidden] from the model flags)");
  }
  if (map_.IsLast(stage)) {
    state.root = MicrobatchLoss(output, targets_.at(stage.value).at(mb.value), microbatches_);
    losses_.push_back(state.root.detach());
  } else {
    state.root = output;
    state.output = output.detach().contiguous();
  }
  return Status::Ok();
}

Status TorchExecutor::Backward(StageId stage, MicrobatchId mb, bool input_only) {
  StageModule* model = Local(stage);
  if (model == nullptr) return InvalidArgument(Name(stage, mb) + " is not on this rank");
  const char* kind = input_only ? "I" : "B";
  PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(stage, mb, kind));
  if (!state->root.defined()) {
    return FailedPrecondition(std::string(kind) + " of " + Name(stage, mb) +
                              " runs a second backward");
  }
  std::vector<at::Tensor> grads;
  if (!map_.IsLast(stage)) {
    at::Tensor grad;
    if (OnThisRank(stage.value + 1)) {
      PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * next, Find(StageId(stage.value + 1), mb, kind));
      grad = std::exchange(next->input_grad, at::Tensor());  // passed on here, not sent
    } else {
      grad = state->received_grad;
    }
    if (!grad.defined()) {
      return FailedPrecondition(std::string(kind) + " of " + Name(stage, mb) +
                                " has no output gradient (the next stage's backward or this "
                                "stage's RECV_B has not run)");
    }
    grads.push_back(grad);
  }
  if (input_only && model->split() == BackwardSplit::kGraphCut) {
    state->weight = GraphCut::RunInput(state->root, grads, state->input, model->parameters());
  } else {
    std::vector<at::Tensor> inputs;
    if (input_only) {
      inputs = model->InputPhaseParameters();
      inputs.push_back(state->input);
    }
    // A first stage whose parameters are all frozen has nothing to differentiate.
    if (state->root.requires_grad()) {
      torch::autograd::backward({state->root}, grads, /*retain_graph=*/false,
                                /*create_graph=*/false, inputs);
    }
  }
  state->root = at::Tensor();
  // The first stage's input gradient goes nowhere; a sent one stays until its send completes
  // (SendCompleted). The input itself may live on in what W still needs: its grad field must
  // not keep the gradient alive too, or the gradient would go with W or the send, whichever
  // ended last.
  if (!map_.IsFirst(stage)) state->input_grad = state->input.grad().contiguous();
  state->input.mutable_grad().reset();
  state->input = at::Tensor();
  // The next stage has used the activation sent (its gradient came back): F's memory goes.
  state->output = at::Tensor();
  state->received_input = at::Tensor();
  state->received_grad = at::Tensor();
  return Status::Ok();
}

Status TorchExecutor::Weight(StageId stage, MicrobatchId mb) {
  StageModule* model = Local(stage);
  if (model == nullptr) return InvalidArgument(Name(stage, mb) + " is not on this rank");
  PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(stage, mb, "W"));
  if (state->root.defined()) {
    return FailedPrecondition("W of " + Name(stage, mb) + " runs before its I");
  }
  switch (model->split()) {
    case BackwardSplit::kDeferredGemms:
      model->ApplyWeightGrads(state->stash);
      break;
    case BackwardSplit::kGraphCut:
      if (!state->weight.has_value() || !state->weight->RunWeight()) {
        return FailedPrecondition("W of " + Name(stage, mb) + " runs twice or after a full B");
      }
      state->weight.reset();
      break;
  }
  return Status::Ok();
}

Status TorchExecutor::Run(const Action& action, const runtime::OpContext& context) {
  if (meter_ == nullptr) return Compute(action, context);
  const MemoryMeter::Scope scope(meter_.get());
  const int64_t before = meter_->Allocated();
  meter_->ResetPeak();
  Status status = Compute(action, context);
  const auto bytes = [](int64_t b) { return static_cast<double>(b); };
  memory_.push_back(
      {context.action_index,
       {.start = bytes(before), .end = bytes(meter_->Allocated()), .peak = bytes(meter_->Peak())}});
  return status;
}

std::vector<runtime::OpMemory> TorchExecutor::TakeOpMemory() { return std::exchange(memory_, {}); }

std::vector<StageStatic> TorchExecutor::StageStaticBytes() {
  std::set<const void*> counted;  // a storage shared by two tensors counts once
  const auto bytes_of = [&](const at::Tensor& t) {
    if (!t.defined() || !counted.insert(t.storage().data()).second) return 0.0;
    return static_cast<double>(t.storage().nbytes());
  };
  std::vector<StageStatic> out;
  size_t index = 0;  // into parameters_, the optimizer's order
  for (const auto& stage : stages_) {
    double bytes = 0.0;
    for (const at::Tensor& param : stage->parameters()) {
      bytes += bytes_of(param) + bytes_of(param.grad());
      for (const auto& [name, state] : optimizer_->StateOf(index++)) bytes += bytes_of(state);
    }
    const StageId id(stage->stage());
    const auto data_bytes = [&](const std::map<int, std::vector<at::Tensor>>& data) {
      double sum = 0.0;
      const auto it = data.find(id.value);
      if (it == data.end()) return sum;
      for (const at::Tensor& t : it->second) sum += bytes_of(t);
      return sum;
    };
    const double inputs = data_bytes(inputs_);
    const double targets = data_bytes(targets_);
    out.push_back({.stage = id,
                   .bytes = bytes + inputs + targets,
                   .input_bytes = inputs,
                   .target_bytes = targets});
  }
  return out;
}

Status TorchExecutor::Compute(const Action& action, const runtime::OpContext& context) {
  // The first backward after a failed verdict: the replay is over, and with it the transfers
  // of the discarded forwards.
  if (action.kind != ActionKind::kForward && action.kind != ActionKind::kPostValidation) {
    forgotten_.clear();
  }
  switch (action.kind) {
    case ActionKind::kForward:
      return Forward(action.stage, action.microbatch);
    case ActionKind::kBackward:
      return Backward(action.stage, action.microbatch, /*input_only=*/false);
    case ActionKind::kBackwardInput:
      return Backward(action.stage, action.microbatch, /*input_only=*/true);
    case ActionKind::kBackwardWeight:
      return Weight(action.stage, action.microbatch);
    case ActionKind::kOverlapFB:
      // On CPU the two halves run in turn; the cell is timed as one op.
      for (const Action& part : action.sub_actions) {
        PIPEPLAN_RETURN_IF_ERROR(Compute(part, context));
      }
      return Status::Ok();
    case ActionKind::kPostValidation:
      return Status::Ok();  // Validate judges; the verdict is not an op to time on its own
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      break;
  }
  return InvalidArgument("the executor was handed a comm action");
}

StatusOr<std::span<std::byte>> TorchExecutor::SendBuffer(const Action& send,
                                                         const runtime::OpContext& /*context*/) {
  const MemoryMeter::Scope scope(meter_.get());
  switch (send.kind) {
    case ActionKind::kSendForward: {
      PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(send.stage, send.microbatch, "SEND_F"));
      if (!state->output.defined()) {
        return FailedPrecondition("SEND_F of " + Name(send.stage, send.microbatch) +
                                  " has no activation (the stage is the last one)");
      }
      return BytesOf(state->output);
    }
    case ActionKind::kSendBackward: {
      PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(send.stage, send.microbatch, "SEND_B"));
      if (!state->input_grad.defined()) {
        return FailedPrecondition("SEND_B of " + Name(send.stage, send.microbatch) +
                                  " runs before its backward");
      }
      return BytesOf(state->input_grad);
    }
    case ActionKind::kSendPostValidation:
      // The last rank's own table is complete (the end of the previous step brought every
      // rank's state along the ranks to it); the others pass on what they received.
      return BytesOf(rank_.value + 1 == map_.num_ranks() ? gradient_states_ : validation_table_);
    default:
      return InvalidArgument(std::string(KindToken(send.kind)) + " is not a send");
  }
}

Status TorchExecutor::SendCompleted(const Action& send, const runtime::OpContext& /*context*/) {
  if (send.kind != ActionKind::kSendBackward) return Status::Ok();
  const MemoryMeter::Scope scope(meter_.get());
  PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(send.stage, send.microbatch, "SEND_B"));
  state->input_grad = at::Tensor();
  return Status::Ok();
}

StatusOr<std::span<std::byte>> TorchExecutor::RecvBuffer(const Action& recv,
                                                         const runtime::OpContext& context) {
  if (meter_ == nullptr) return AllocateReceive(recv);
  const MemoryMeter::Scope scope(meter_.get());
  const auto before = static_cast<double>(meter_->Allocated());
  StatusOr<std::span<std::byte>> buffer = AllocateReceive(recv);
  // The message's buffer is counted as the receive's own memory (profile: received_*).
  const auto after = static_cast<double>(meter_->Allocated());
  memory_.push_back(
      {context.action_index, {.start = before, .end = after, .peak = std::max(before, after)}});
  return buffer;
}

StatusOr<std::span<std::byte>> TorchExecutor::AllocateReceive(const Action& recv) {
  switch (recv.kind) {
    case ActionKind::kRecvForward: {
      Microbatch& state = live_[{recv.stage.value, recv.microbatch.value}];
      state.received_input = EmptyActivation();
      return BytesOf(state.received_input);
    }
    case ActionKind::kRecvBackward: {
      PIPEPLAN_ASSIGN_OR_RETURN(Microbatch * state, Find(recv.stage, recv.microbatch, "RECV_B"));
      state->received_grad = EmptyActivation();
      return BytesOf(state->received_grad);
    }
    case ActionKind::kRecvPostValidation:
      return BytesOf(validation_table_);
    default:
      return InvalidArgument(std::string(KindToken(recv.kind)) + " is not a receive");
  }
}

double TorchExecutor::LocalLoss() const {
  return losses_.empty() ? 0.0 : at::stack(losses_).sum().item<double>();
}

Status TorchExecutor::EndStep(const runtime::OpContext& context) {
  const MemoryMeter::Scope scope(meter_.get());
  // Reading the loss waits for the device: read after the update is queued where nothing
  // before it needs the value, so that the update's kernels follow the last backward's
  // instead of being launched one by one onto an idle GPU.
  const auto read_loss = [&] {
    last_loss_ =
        losses_.empty() ? std::numeric_limits<double>::quiet_NaN() : LocalLoss() + mirror_loss_;
    return last_loss_;
  };
  last_loss_ = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [key, state] : live_) {
    if (!state.stash.empty() || state.weight.has_value()) {
      return FailedPrecondition("the step ended with the W of " +
                                Name(StageId(key.first), MicrobatchId(key.second)) + " never run");
    }
  }
  if (options_.on_gradients) {
    std::vector<StageGradients> all;
    for (const auto& stage : stages_) {
      StageGradients g{stage->stage(), &stage->parameter_names(), {}};
      for (const at::Tensor& p : stage->parameters()) {
        g.grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p));
      }
      all.push_back(std::move(g));
    }
    PIPEPLAN_RETURN_IF_ERROR(options_.on_gradients(context.step, read_loss(), all));
  }
  if (speculation_) {
    return FailedPrecondition("the step ended before its PV judged the previous step's update");
  }
  StepRecord record;
  record.step = context.step;
  live_.clear();
  forgotten_.clear();
  if (!ExchangesGradientState()) {
    optimizer_->Step();
    record.loss = read_loss();
    records_.push_back(record);
    return ReportParameters(context.step + 1);
  }
  if (!own_state_written_) {
    return FailedPrecondition("the step ended without the gradient-state exchange");
  }
  own_state_written_ = false;
  record.loss = read_loss();
  if (context.speculative) return Speculate(record);
  Update(record, SumGradientStates(gradient_states_));
  records_.push_back(record);
  return ReportParameters(context.step + 1);
}

}  // namespace pipeplan::torch_ext
