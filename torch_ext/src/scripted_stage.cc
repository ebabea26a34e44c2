#include "pipeplan/torch_ext/scripted_stage.h"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include <utility>

namespace pipeplan::torch_ext {

struct ScriptedStage::Module {
  torch::jit::Module module;
};

std::string ScriptedStagePath(const std::string& directory, int stage) {
  return directory + "/stage-" + std::to_string(stage) + ".pt";
}

StatusOr<std::unique_ptr<ScriptedStage>> ScriptedStage::Load(const std::string& path, int stage,
                                                             at::Device device) {
  auto module = std::make_unique<Module>();
  try {
    module->module = torch::jit::load(path, device);
  } catch (const std::exception& e) {
    // TorchScript's message carries a C++ backtrace after its first line.
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return InvalidArgument("stage " + std::to_string(stage) + ": cannot load TorchScript module " +
                           path + ": " + what);
  }
  if (!module->module.find_method("forward")) {
    return InvalidArgument("stage " + std::to_string(stage) + ": " + path +
                           " has no forward method");
  }
  module->module.train();
  return std::unique_ptr<ScriptedStage>(new ScriptedStage(std::move(module), stage));
}

ScriptedStage::ScriptedStage(std::unique_ptr<Module> module, int stage)
    : module_(std::move(module)), stage_(stage) {
  for (const auto& named : module_->module.named_parameters(/*recurse=*/true)) {
    if (!named.value.requires_grad()) continue;  // frozen: no gradient, no optimizer step
    parameters_.push_back(named.value);
    names_.push_back(named.name);
  }
}

ScriptedStage::~ScriptedStage() = default;

namespace {

// TorchScript's optimising executor turns a trained module's graph into one differentiable
// subgraph, whose backward is a single autograd node that computes every gradient at once:
// I could not skip the weight gradients nor W the input's. Unoptimised, each op records its
// own node, as in eager mode. The setting is per thread; the caller's is restored.
class UnoptimisedExecution {
 public:
  UnoptimisedExecution() : previous_(torch::jit::getGraphExecutorOptimize()) {
    torch::jit::setGraphExecutorOptimize(false);
  }
  ~UnoptimisedExecution() { torch::jit::setGraphExecutorOptimize(previous_); }
  UnoptimisedExecution(const UnoptimisedExecution&) = delete;
  UnoptimisedExecution& operator=(const UnoptimisedExecution&) = delete;

 private:
  bool previous_;
};

}  // namespace

at::Tensor ScriptedStage::Forward(const at::Tensor& x, WeightGradStash* /*stash*/) const {
  const UnoptimisedExecution unoptimised;
  return module_->module.forward({x}).toTensor();
}

}  // namespace pipeplan::torch_ext
