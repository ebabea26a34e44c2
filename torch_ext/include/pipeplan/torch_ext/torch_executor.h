// The LibTorch OpExecutor: runs one rank's stages (the built-in transformer, or the user's
// TorchScript modules) on real tensors. F keeps the autograd graph; B runs the full
// backward; I takes the input gradients only and W the weight gradients, split as the stage
// says (stage_module.h); an F&B overlap cell runs its two halves in turn. Gradients
// accumulate over the step's microbatches and EndStep applies the optimizer. Messages are
// the tensors themselves, [microbatch size, sequence, hidden] between stages.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/runtime/op_executor.h"
#include "pipeplan/torch_ext/gradient_state.h"
#include "pipeplan/torch_ext/graph_cut.h"
#include "pipeplan/torch_ext/memory_meter.h"
#include "pipeplan/torch_ext/optimizer.h"
#include "pipeplan/torch_ext/stage_module.h"
#include "pipeplan/torch_ext/step_metrics.h"
#include "pipeplan/torch_ext/transformer_stage.h"

namespace pipeplan::torch_ext {

// One stage's gradients at the end of a step, before the optimizer uses them.
struct StageGradients {
  int stage = 0;
  const std::vector<std::string>* names = nullptr;
  std::vector<at::Tensor> grads;  // parallel to names; zeros where none accumulated
};

// Testing aid: stage `stage`'s gradients become NaN at the end of step `step` (from 0,
// warm-up steps included), on the rank that holds the stage.
struct NonfiniteInjection {
  int step = 0;
  int stage = 0;
};

// One stage's parameters after a step's optimizer update (or before the first step), with
// the optimizer's state for each (optimizer.h's StateOf) and its update count.
struct StageParameters {
  int stage = 0;
  const std::vector<std::string>* names = nullptr;
  std::vector<at::Tensor> params;  // parallel to names; the live tensors (copy to keep)
  std::vector<std::vector<std::pair<std::string, at::Tensor>>> optimizer_state;
  int optimizer_step = 0;
};

struct TorchExecutorOptions {
  // The built-in model's sizes; with stage_modules, the shape of the data (the first stage's
  // input, the messages between stages, the last stage's output and target) and the seed.
  ModelConfig model;
  // A directory of TorchScript modules, stage-S.pt per stage (scripted_stage.h); empty: the
  // built-in transformer stages.
  std::string stage_modules;
  OptimizerOptions optimizer;
  std::string device = "cpu";  // "cpu" or "cuda:N"
  // Counts each op's bytes (memory_meter.h; TakeOpMemory). Off: no meter at all, for the
  // benchmark that prices counting.
  bool count_memory = true;
  // The rank shares its device's allocator with other ranks that take turns on it (every call
  // under the runtime's StepOptions::shared_device): it counts what changes in its own turns
  // (MakeTurnMeter), not the device's total.
  bool memory_in_turns = false;
  // Called in EndStep, before the optimizer step, with this rank's stages' gradients and,
  // on the rank holding the last stage, the step's loss (else NaN). An error fails the step.
  std::function<Status(int step, double loss, const std::vector<StageGradients>&)> on_gradients;
  // > 0: gradients are clipped to this L2 norm over every rank's parameters, by
  // torch.nn.utils.clip_grad_norm_'s rule (gradient_state.h). It, or an injection, makes the
  // step end with the gradient-state exchange (op_executor.h), and a step whose gradients are
  // not finite on some rank is then skipped on every rank: no optimizer step, grads zeroed.
  // With post-validation in the plan the update is speculative instead (Validate): made at
  // the end of the step when ranks 0..r's state allows it, judged at the next step's PV, and
  // undone from an exact copy (parameters, optimizer state) when it must be redone
  // with clipping or skipped.
  double clip_grad_norm = 0;
  // Called with every local stage's parameters before the first step (step 0) and after each
  // step's optimizer update (step s + 1; also when the step was skipped). An error fails it.
  std::function<Status(int step, const std::vector<StageParameters>&)> on_parameters;
  std::optional<NonfiniteInjection> inject_nonfinite;
};

class TorchExecutor final : public runtime::OpExecutor,
                            public runtime::OpMeter,
                            public runtime::GradientExchange {
 public:
  // Builds the stages `plan` places on `rank`; under dual placement (two model copies) the
  // second copy's stage P + j from the weights of stage j, on the second half of the batch
  // (StageMap::DepthOf, BatchMicrobatchOf), on an even number of ranks. What torch throws
  // while building (no such device, out of memory) is returned as an error.
  static StatusOr<std::unique_ptr<TorchExecutor>> Create(const Plan& plan, RankId rank,
                                                         const TorchExecutorOptions& options);

  Status BeginStep(const runtime::OpContext& context) override;
  Status Run(const Action& action, const runtime::OpContext& context) override;
  StatusOr<std::span<std::byte>> SendBuffer(const Action& send,
                                            const runtime::OpContext& context) override;
  StatusOr<std::span<std::byte>> RecvBuffer(const Action& recv,
                                            const runtime::OpContext& context) override;
  // A sent input gradient is freed here, while the step goes on (the activation sent by F
  // stays until the microbatch's backward, which holds it anyway).
  Status SendCompleted(const Action& send, const runtime::OpContext& context) override;
  Status EndStep(const runtime::OpContext& context) override;
  StatusOr<runtime::Verdict> Validate(const Action& pv, const runtime::OpContext& context) override;
  // It measures memory (its meter) and runs the optimizer's exchanges (its gradient exchange).
  runtime::OpMeter* meter() override { return this; }
  runtime::GradientExchange* gradient_exchange() override { return this; }

  // Dual placement: the rank holding the other copies of this rank's two model stages
  // (P - 1 - r). Their gradients are added, as are the two last stages' losses (float32),
  // so both copies take the same update and ranks 0 and P - 1 report the step's loss.
  std::optional<RankId> GradientMirror() const override;
  StatusOr<runtime::MirrorBuffers> MirrorGradientBuffers(
      const runtime::OpContext& context) override;
  Status MirrorReceived(const runtime::OpContext& context) override;
  bool ExchangesGradientState() const override;
  StatusOr<std::span<std::byte>> GradientStateBuffer(RankId rank,
                                                     const runtime::OpContext& context) override;
  // Bytes around each compute action (memory_meter.h: the rank's CPU tensors, or the CUDA
  // caching allocator's device total).
  std::vector<runtime::OpMemory> TakeOpMemory() override;
  // Per local stage, the bytes of its parameters, their gradients and optimizer state, and the
  // data it holds (the first stage's inputs, the last one's targets).
  std::vector<StageStatic> StageStaticBytes() override;

  // This rank's stages, in chunk order.
  const std::vector<std::unique_ptr<StageModule>>& stages() const { return stages_; }
  const at::Device& device() const { return device_; }
  // The loss of the last step ended (NaN unless this rank holds the last stage).
  double last_loss() const { return last_loss_; }
  // One record per step whose update is decided, in order.
  const std::vector<StepRecord>& step_records() const { return records_; }
  // The most bytes an undo copy of a speculative update held (post-validation; 0 without).
  int64_t undo_bytes() const { return undo_bytes_; }

 private:
  static std::span<std::byte> BytesOf(const at::Tensor& t);
  // Create's torch work, which may throw.
  static StatusOr<std::unique_ptr<TorchExecutor>> Build(const Plan& plan, RankId rank,
                                                        const TorchExecutorOptions& options,
                                                        const at::Device& device);

  // What one (stage, microbatch) keeps between its F, backward and W.
  struct Microbatch {
    at::Tensor input;       // leaf the stage ran on; its grad is the gradient to pass back
    at::Tensor root;        // the output (or the loss on the last stage), with its graph
    at::Tensor output;      // detached output: the next stage's input
    at::Tensor input_grad;  // after B / I
    at::Tensor received_input;
    at::Tensor received_grad;
    WeightGradStash stash;
    std::optional<GraphCut> weight;  // kGraphCut: W's part of the graph, after I
  };
  using Key = std::pair<int, int>;  // (stage, microbatch)

  TorchExecutor(const Plan& plan, RankId rank, const TorchExecutorOptions& options,
                std::vector<std::unique_ptr<StageModule>> stages,
                std::unique_ptr<MemoryMeter> meter);

  Status Compute(const Action& action, const runtime::OpContext& context);
  Status Forward(StageId stage, MicrobatchId mb);
  Status Backward(StageId stage, MicrobatchId mb, bool input_only);
  Status Weight(StageId stage, MicrobatchId mb);
  StatusOr<std::span<std::byte>> AllocateReceive(const Action& recv);
  StatusOr<Microbatch*> Find(StageId stage, MicrobatchId mb, const char* needed_by);
  StageModule* Local(StageId stage);
  // The sum of the losses of this rank's last stages this step (0 without any).
  double LocalLoss() const;
  bool OnThisRank(int stage) const;
  at::Tensor EmptyActivation() const;
  void LoadData();
  void InjectNonfinite(int step);
  Status ReportParameters(int step);
  Status Speculate(StepRecord record);
  // Whether the update needs neither clipping nor a skip for this state.
  bool UpdatesAsIs(const GlobalGradientState& state) const;
  // The update the global state decides: clipped, skipped (grads zeroed) or as is.
  void Update(StepRecord& record, const GlobalGradientState& global);

  // A speculative update waiting for its verdict.
  struct Speculation {
    StepRecord record;
    bool stepped = false;                   // ranks 0..r's state allowed the update
    std::optional<OptimizerSnapshot> undo;  // before it, where another rank may still object
  };

  StageMap map_;
  RankId rank_;
  int microbatches_;
  TorchExecutorOptions options_;
  at::Device device_;
  std::vector<std::unique_ptr<StageModule>> stages_;  // this rank's, in chunk order
  std::unique_ptr<MemoryMeter> meter_;
  std::vector<runtime::OpMemory> memory_;  // this step's, in program order
  std::vector<at::Tensor> parameters_;     // every local stage's, in stage order
  // Those of the first model copy's stages: every model stage once across the ranks (the
  // global gradient norm counts them).
  std::vector<at::Tensor> first_copy_parameters_;
  // Dual placement's gradient sum: every local parameter by model depth (the mirror's
  // order too), the buffers while it lasts, and the mirror's part of the loss (0 without).
  std::vector<at::Tensor> mirror_parameters_;
  at::Tensor mirror_send_;
  at::Tensor mirror_receive_;
  double mirror_loss_ = 0.0;
  std::unique_ptr<Optimizer> optimizer_;
  // The gradient-state exchange's buffers, a [ranks, kGradientStateValues] float64 table on
  // the device; whether this rank's row holds this step's state.
  at::Tensor gradient_states_;
  bool own_state_written_ = false;
  bool initial_parameters_reported_ = false;
  std::vector<StepRecord> records_;
  std::map<Key, Microbatch> live_;
  // The message buffers of forwards a failed verdict discarded (their graphs are freed at
  // once): kept until the replay is over, since they must outlive the transfers.
  std::map<Key, Microbatch> forgotten_;
  int forwards_this_step_ = 0;
  std::optional<Speculation> speculation_;
  int64_t undo_bytes_ = 0;
  // The post-validation message: the last rank's complete gradient-state table, received and
  // passed on (the runtime posts SEND_PV once RECV_PV has landed).
  at::Tensor validation_table_;
  std::vector<at::Tensor> losses_;
  // The data loader's part, made once when the executor is built and the same every step: each
  // microbatch's input (this rank holds the first stage) and target (the last), on the device,
  // so no F times data generation or a host-to-device copy.
  std::map<int, std::vector<at::Tensor>> inputs_;   // by stage: first stages only
  std::map<int, std::vector<at::Tensor>> targets_;  // by stage: last stages only
  // Whether this rank's program splits a backward into I and W (then every stage's input
  // needs its gradient, the first's too: the split cuts the graph there).
  bool splits_backward_;
  double last_loss_;
};

}  // namespace pipeplan::torch_ext
