// A user's stage: a TorchScript module (torch.jit.script(...).save(path), or the C++ API)
// whose forward takes the stage input and returns its output. The backward splits by graph
// cut (stage_module.h), since the module's weight GEMMs cannot be deferred from outside.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "pipeplan/model/status.h"
#include "pipeplan/torch_ext/stage_module.h"

namespace pipeplan::torch_ext {

// Where stage `stage`'s module is expected in a stage-module directory: DIR/stage-S.pt.
std::string ScriptedStagePath(const std::string& directory, int stage);

class ScriptedStage final : public StageModule {
 public:
  // Loads `path` onto `device`; errors name the file and what TorchScript said.
  static StatusOr<std::unique_ptr<ScriptedStage>> Load(const std::string& path, int stage,
                                                       at::Device device);
  ~ScriptedStage() override;

  int stage() const override { return stage_; }
  BackwardSplit split() const override { return BackwardSplit::kGraphCut; }
  at::Tensor Forward(const at::Tensor& x, WeightGradStash* stash) const override;
  std::vector<at::Tensor> InputPhaseParameters() const override { return {}; }
  void ApplyWeightGrads(WeightGradStash& /*stash*/) override {}
  const std::vector<at::Tensor>& parameters() const override { return parameters_; }
  const std::vector<std::string>& parameter_names() const override { return names_; }

 private:
  struct Module;  // torch::jit::Module, kept out of this header (torch/script.h is heavy)
  ScriptedStage(std::unique_ptr<Module> module, int stage);

  std::unique_ptr<Module> module_;
  int stage_;
  std::vector<at::Tensor> parameters_;
  std::vector<std::string> names_;
};

}  // namespace pipeplan::torch_ext
