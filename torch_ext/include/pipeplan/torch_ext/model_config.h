// The built-in model's shape: a stack of pre-norm transformer blocks (attention + MLP) cut
// into equal stages, fed with synthetic data from a seed. Torch-free so command-line parsing
// and tests can use it without LibTorch headers.
#pragma once

#include <cstdint>
#include <string>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

struct ModelConfig {
  int layers_per_stage = 2;
  int hidden = 64;
  int heads = 4;
  int sequence = 16;
  int microbatch_size = 2;  // samples per microbatch
  uint64_t seed = 1;        // parameters and data are drawn from it, per stage / microbatch
};

// Checks every size is positive and hidden divides into heads.
Status ValidateModelConfig(const ModelConfig& config);

// "4 stages x 2 layers, hidden 64, 4 heads, sequence 16, microbatch 2, seed 1".
std::string Describe(const ModelConfig& config, int stages);

}  // namespace pipeplan::torch_ext
