// 'pipeplan import --format torch-trace': torch.profiler traces of a torch pipelining job,
// one per rank, to a measured timeline file of the plan the job ran.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/app/request_flags.h"
#include "pipeplan/measurement/import_trace.h"
#include "pipeplan/measurement/layer_trace.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"

namespace pipeplan::cli {

// The most JSON one trace may hold once inflated, unless --max-trace-size says otherwise: a
// few steps of a large model's trace fit; a gzip bomb does not.
inline constexpr uint64_t kDefaultMaxTraceBytes = uint64_t{1} << 30;

struct TraceImportOptions {
  std::vector<std::string> traces;  // one per rank
  std::optional<std::string> plan;  // the plan the job ran; else its executed compute order
  std::optional<int> step;          // ProfilerStep number to write; else the median
  std::string strategy_name = "imported";
  app::CostFlags costs;  // for the plan built without --plan
  std::optional<std::string> output;
  std::optional<std::string> plan_output;     // also write the plan the traces were matched to
  std::optional<std::string> profile_output;  // also write a profile of every imported step
  uint64_t max_trace_bytes = kDefaultMaxTraceBytes;  // per trace, once inflated
};

// A trace's time unit, in seconds: the imported timeline's times are microseconds.
inline constexpr double kTraceSecondsPerUnit = 1e-6;

// The traces read (options.traces, options.max_trace_bytes) and matched to `plan`, or without
// one to the order they ran (built with options.costs): what ExecuteTraceImport writes, in
// memory (pipeplan.import_torch_traces). `notes` say what the import estimated or left out.
struct ImportedTraces {
  Plan plan;
  std::vector<TraceFile> ranks;  // in rank order
  TraceImport imported;          // every step; `chosen` is options.step's or the median
  std::vector<std::string> notes;
};
StatusOr<ImportedTraces> ImportTraces(const TraceImportOptions& options, std::optional<Plan> plan);

// Reads the traces and writes the timeline (and the plan, the profile) the options name.
Status ExecuteTraceImport(const TraceImportOptions& options);

// The layer ranges of the traces (options.traces, options.max_trace_bytes) as a layer cost
// file, in memory (pipeplan.import_layer_traces).
StatusOr<LayerTraceImport> ImportLayerTraces(const TraceImportOptions& options);

// 'pipeplan import --format torch-layer-trace': the layer ranges of the traces
// (options.traces, options.max_trace_bytes) to a layer cost file at options.output
// (measurement/layer_trace.h).
Status ExecuteLayerTraceImport(const TraceImportOptions& options);

}  // namespace pipeplan::cli
