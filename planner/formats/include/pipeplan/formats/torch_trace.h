// torch.profiler Chrome traces (export_chrome_trace, one per rank): what a
// torch.distributed.pipelining job recorded about each action it ran. Torch's schedule runtime
// wraps every action in a record_function range "PP:<token>" (tokens as in its CSV grammar);
// on a GPU, kernel launches ("cuda_runtime"/"cuda_driver") and kernels ("kernel", "gpu_memcpy",
// "gpu_memset") share correlation ids, and Kineto repeats ranges as "gpu_user_annotation"
// spanning the kernels launched from the range's own thread; with profile_memory=True, "[memory]"
// instant events carry the allocator's total.
//
// Parsing only: the trace's own facts, in its own clock (microseconds). Matching them to a
// plan, picking steps and aligning ranks is measurement/import_trace.h's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// One "PP:" range: an action torch's runtime executed.
struct TraceAction {
  Action action;       // compute or transfer; peer unset (the trace does not say)
  std::string token;   // as written after "PP:"
  int64_t event = 0;   // index in traceEvents, for messages
  double start = 0.0;  // the host-side range (microseconds, see TorchTrace)
  double end = 0.0;
  double work_start = 0.0;  // first operator inside the range on its thread (its end
                            // if none): before it, an action that needs a received
                            // input only waited for it
  // GPU traces: from the first to the last kernel launched while the range ran, from any
  // thread, joined with the range's gpu_user_annotation. The annotation alone is not enough:
  // it covers the kernels of the range's own thread, and autograd launches backward kernels
  // (B, I, W) from threads of its own. nullopt on CPU traces.
  std::optional<double> device_start;
  std::optional<double> device_end;
};

// A "ProfilerStep#N" range.
struct TraceStep {
  int number = 0;
  double start = 0.0;
  double end = 0.0;
};

// A "[memory]" event: the allocator's total after an allocation or a free.
struct TraceMemory {
  double time = 0.0;
  double allocated = 0.0;          // bytes ("Total Allocated")
  double bytes = 0.0;              // what this event allocated (< 0: freed), "Bytes"
  bool device = false;             // a GPU allocator's (device type 1), else the CPU's
  std::optional<int64_t> address;  // "Addr": pairs a free with its allocation
};

// "pipeplan_stages" metadata (python/pipeplan_profiler.py given the schedule): a stage the
// rank holds, its parameters' bytes and whether their gradients were allocated when the step's
// first forward began (false: the loop frees them between steps, set_to_none).
struct TraceStageParameters {
  int stage = 0;
  double parameter_bytes = 0.0;
  bool gradients_held = true;
};

// A "pipeplan.layer.forward:<name>" or "pipeplan.layer.backward:<name>" range
// (python/pipeplan_profiler.py's mark_layers): one microbatch's forward or backward of a layer.
struct TraceLayerRange {
  std::string layer;
  bool backward = false;
  int64_t event = 0;   // index in traceEvents, for messages
  double start = 0.0;  // the host range (microseconds, see TorchTrace)
  double end = 0.0;
  // GPU traces, as for TraceAction: the kernels launched while the range ran.
  std::optional<double> device_start;
  std::optional<double> device_end;
};

// "pipeplan_layers" metadata (mark_layers): a layer's parameters' bytes and its output's.
struct TraceLayerBytes {
  std::string layer;
  double parameter_bytes = 0.0;
  std::optional<double> output_bytes;  // absent when the layer ran no forward
};

struct TorchTrace {
  std::optional<int> rank;        // distributedInfo.rank
  std::optional<int> world_size;  // distributedInfo.world_size
  std::string backend;            // distributedInfo.backend, "" if absent
  int64_t base_nanoseconds = 0;   // baseTimeNanoseconds: the clock base of `ts`, 0 if absent
  // Every time below is in microseconds since this one (the first event's whole microsecond
  // of `ts`), so that nanoseconds survive in a double.
  int64_t origin_microseconds = 0;
  std::vector<TraceAction> actions;  // by start time
  std::vector<TraceStep> steps;      // by start time
  std::vector<TraceMemory> memory;   // by time
  int skipped_bookkeeping = 0;       // REDUCE_GRAD, UNSHARD, RESHARD ranges (not in plans)
  // "pipeplan_live_bytes" metadata (python/pipeplan_profiler.py, CPU jobs): ProfilerStep number
  // -> the bytes of CPU tensors alive at that step's end, counted by the job itself. A CPU
  // trace's allocator total counts only what was allocated while the profiler recorded; this
  // says how much more the process held. By step number.
  std::vector<std::pair<int, double>> live_bytes;
  std::vector<TraceStageParameters> stage_parameters;  // by stage
  std::vector<TraceLayerRange> layer_ranges;           // by start time
  std::vector<TraceLayerBytes> layer_bytes;            // as written
};

// What the caller reads of a trace: a pipelining job's "PP:" actions (an error when it has
// none), or its layers' ranges (an error when it has none; actions are read too when there).
enum class TraceContent : uint8_t { kActions, kLayers };

// Parses one trace (JSON text, already decompressed). Errors name the event ("event 1234
// (PP:0X1): ...") or what is missing; the caller adds the file name.
StatusOr<TorchTrace> ParseTorchTrace(std::string_view json,
                                     TraceContent content = TraceContent::kActions);

}  // namespace pipeplan
