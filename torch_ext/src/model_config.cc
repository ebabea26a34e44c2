#include "pipeplan/torch_ext/model_config.h"

namespace pipeplan::torch_ext {

Status ValidateModelConfig(const ModelConfig& config) {
  const auto positive = [](int value, const char* name) -> Status {
    if (value < 1) {
      return InvalidArgument(std::string(name) + " must be at least 1, got " +
                             std::to_string(value));
    }
    return Status::Ok();
  };
  PIPEPLAN_RETURN_IF_ERROR(positive(config.layers_per_stage, "layers per stage"));
  PIPEPLAN_RETURN_IF_ERROR(positive(config.hidden, "hidden size"));
  PIPEPLAN_RETURN_IF_ERROR(positive(config.heads, "heads"));
  PIPEPLAN_RETURN_IF_ERROR(positive(config.sequence, "sequence length"));
  PIPEPLAN_RETURN_IF_ERROR(positive(config.microbatch_size, "microbatch size"));
  if (config.hidden % config.heads != 0) {
    return InvalidArgument("hidden size " + std::to_string(config.hidden) +
                           " is not a multiple of the " + std::to_string(config.heads) + " heads");
  }
  return Status::Ok();
}

std::string Describe(const ModelConfig& config, int stages) {
  return std::to_string(stages) + " stages x " + std::to_string(config.layers_per_stage) +
         " layers, hidden " + std::to_string(config.hidden) + ", " + std::to_string(config.heads) +
         " heads, sequence " + std::to_string(config.sequence) + ", microbatch " +
         std::to_string(config.microbatch_size) + ", seed " + std::to_string(config.seed);
}

}  // namespace pipeplan::torch_ext
