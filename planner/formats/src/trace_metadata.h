// pipeplan's own metadata in a torch.profiler trace (python/pipeplan_profiler.py writes it
// with add_metadata_json): each reader fills its part of the TorchTrace, errors naming the key.
#pragma once

#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/model/status.h"
#include "trace_json.h"

namespace pipeplan::trace_json {

// "pipeplan_live_bytes": {"<step number>": bytes, ...}.
Status ReadLiveBytes(od::value value, TorchTrace* trace);
// "pipeplan_stages": {"<stage>": {"parameter_bytes": N, "gradients_held": true|false}, ...}.
Status ReadStageParameters(od::value value, TorchTrace* trace);
// "pipeplan_layers": {"<layer>": {"parameter_bytes": N, "output_bytes": N}, ...}.
Status ReadLayerBytes(od::value value, TorchTrace* trace);

}  // namespace pipeplan::trace_json
