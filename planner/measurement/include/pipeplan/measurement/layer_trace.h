// A layer cost file from torch.profiler traces whose layers carry pipeplan's ranges
// (python/pipeplan_profiler.py's mark_layers): what 'pipeplan partition' splits, measured on
// the user's own job instead of assumed.
//
// Per layer: its forward and its backward, each the median over every microbatch the traces
// hold (device spans on a GPU trace, host ranges elsewhere), in microseconds. With memory
// events (profile_memory=True), its activation is the median of what the allocator held more
// at the end of its forward than at its start (the device's allocator on a GPU trace), and its
// parameter and output bytes come from the traces' "pipeplan_layers" metadata. Layers are in
// model order: in a pipelining job (its "PP:" ranges) by the stage whose forward ran them,
// elsewhere rank by rank; within either, in the order their first forward ran. A layer on
// several ranks (a dual placement's two copies) is one layer, its samples pooled.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/measurement/import_trace.h"
#include "pipeplan/model/layer_costs.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

struct LayerSampleCounts {
  int forwards = 0;
  int backwards = 0;
};

struct LayerTraceImport {
  LayerCosts costs;                       // time_unit "us"; valid (ValidateLayerCosts)
  std::vector<LayerSampleCounts> counts;  // per layer of `costs`, how many ranges made it
  std::vector<std::string> notes;         // what the figures leave out, and why
};

// `ranks`: the traces parsed with TraceContent::kLayers, in rank order. A trace of a job that
// splits the backward into I and W (zero-bubble) is refused: a layer's backward range there
// times only its I. A layer with a backward but no forward range is an error naming it and
// the file; one with no backward range (nothing in it needed a gradient) gets a backward of 0
// and a note.
StatusOr<LayerTraceImport> LayerCostsOfTraces(const std::vector<TraceFile>& ranks);

}  // namespace pipeplan
