// The gradients one stage accumulated in a step (and the step's loss, on the last stage), as
// 'pipeplan-torch run --dump-grads' writes them: a small binary file per stage, read back by
// the tests that compare pipelined gradients with a non-pipelined reference. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

struct NamedValues {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major
};

struct GradientDump {
  int stage = 0;
  double loss = 0.0;  // NaN unless the stage is the last one
  std::vector<NamedValues> gradients;
};

std::string EncodeGradientDump(const GradientDump& dump);
// Errors say what is malformed and at which byte.
StatusOr<GradientDump> DecodeGradientDump(std::string_view bytes);

// "stage-3.grads": the file name of a stage's dump in a dump directory.
std::string GradientDumpName(int stage);

}  // namespace pipeplan::torch_ext
