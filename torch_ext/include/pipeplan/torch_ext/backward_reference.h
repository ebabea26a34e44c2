// B alone, for a profile's split check: how long one microbatch's full backward through a
// stage takes when run as the executor's B runs it (the stage's own forward, then autograd
// from its output with an upstream gradient, or from the loss on the last stage), outside any
// step. Set beside a split plan's measured I + W it says whether the stage's split repeats work
// (I + W above B), which the zero-bubble schedules assume it does not: a user's TorchScript
// stage splits by cutting its graph (graph_cut.h), and a bad cut runs the backward twice.
//
// Each repetition draws a fresh input; one warm-up repetition is not counted. The stage's
// parameters keep the gradients they had (autograd's accumulation is undone). On a GPU each
// backward is timed by CUDA events on the current stream with nothing synchronised between
// repetitions, as a step's ops are (the host clock between synchronisations would also count
// the launches of a launch-bound backward: 16% more for a small TorchScript stage on an H200);
// on the CPU by the host clock.
#pragma once

#include <c10/core/Device.h>

#include "pipeplan/model/status.h"
#include "pipeplan/torch_ext/model_config.h"
#include "pipeplan/torch_ext/stage_module.h"

namespace pipeplan::torch_ext {

struct BackwardReference {
  bool last_stage = false;  // B starts from the loss (mean squared error over M microbatches)
  int microbatches = 1;     // the plan's M, which scales the last stage's loss
  int repetitions = 5;
};

// The median seconds of one full backward of `stage` on `device`; the data are
// [microbatch size, sequence, hidden] after `model`.
StatusOr<double> MedianBackwardSeconds(const StageModule& stage, const ModelConfig& model,
                                       const c10::Device& device,
                                       const BackwardReference& reference);

}  // namespace pipeplan::torch_ext
