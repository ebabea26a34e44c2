// The optimizer step EndStep applies after the step's last W: SGD or AdamW over one rank's
// parameters, written with plain tensor ops (no torch::optim, to keep compile times down).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

enum class OptimizerKind : uint8_t { kSgd, kAdamW };

StatusOr<OptimizerKind> ParseOptimizerKind(std::string_view name);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 1e-3;
  double weight_decay = 0.0;  // AdamW: decoupled decay
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// What Optimizer::Update writes, copied, so that an update can be undone bit for bit (an
// algebraic inverse of AdamW's would not be exact in floating point): the parameters, the
// optimizer's state and its update count. The grads need no copy: Update leaves them alone.
struct OptimizerSnapshot {
  std::vector<at::Tensor> params;
  std::vector<at::Tensor> state;
  int steps = 0;
  int64_t bytes() const;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter from its grad (those that never had a grad are left alone), then
  // zeroes the grads in place: they stay allocated from step to step, as Megatron's gradient
  // buffers do, so a rank's memory at the start of a step is its parameters, gradients and
  // optimizer state.
  void Step() {
    Update();
    ZeroGrads();
  }
  // The update alone: the grads keep their values (a speculative update may have to be redone
  // from them).
  virtual void Update() = 0;
  void ZeroGrads();
  // The state kept for parameter `index` (in the order the optimizer was given them), under
  // torch.optim's names (AdamW: exp_avg, exp_avg_sq; SGD: none), and the updates applied.
  virtual std::vector<std::pair<std::string, at::Tensor>> StateOf(size_t index) const = 0;
  virtual int steps() const = 0;

  OptimizerSnapshot Save() const;
  // Puts the parameters, state and update count back in place (the tensors keep their
  // identity, so autograd graphs and views of them stay valid).
  void Restore(const OptimizerSnapshot& snapshot);

 protected:
  virtual const std::vector<at::Tensor>& parameters() const = 0;
  virtual std::vector<at::Tensor> StateTensors() const = 0;  // live, in a fixed order
  virtual void set_steps(int steps) = 0;
};

std::unique_ptr<Optimizer> MakeOptimizer(std::vector<at::Tensor> parameters,
                                         const OptimizerOptions& options);

}  // namespace pipeplan::torch_ext
