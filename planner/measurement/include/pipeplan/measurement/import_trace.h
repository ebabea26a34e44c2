// Measured timelines from torch.profiler traces of a torch.distributed.pipelining job that ran
// `plan` (one trace per rank): every complete step of the job as a Timeline of the plan, so
// 'pipeplan profile', 'calibrate' and 'diff' read the user's own model as they read
// 'pipeplan run'. The traces' facts come from formats/torch_trace.h.
//
// Per action: on a GPU trace its device span (the kernels it launched), else its host range;
// an action that needs a received input waits for it inside its range first, so on the host
// it starts at its first operator, and that is where the receive ends (for the gradient of an
// F&B cell's backward half, which waits mid-cell, the cell's end). Memory: the allocator's
// total (the device's on GPU traces) at each action's start and end and the most in between,
// in bytes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// One trace file: where it came from (for messages) and what it held.
struct TraceFile {
  std::string name;
  TorchTrace trace;
};

struct ImportedStep {
  int number = 0;  // the ProfilerStep number, or the step's index when the trace has none
  Timeline timeline;
  std::vector<double> clock_shifts;  // per rank, microseconds the alignment added
};

struct TraceImport {
  std::vector<ImportedStep> steps;  // every complete step, in order
  size_t chosen = 0;                // the median step, or the one asked for
  OpClock clock = OpClock::kProfilerHost;
  std::vector<std::string> notes;  // what was read but left out, and why
};

// Puts the files in rank order: by each trace's distributedInfo.rank when every trace has
// one, else in the order given. Mixed, duplicate or out-of-range ranks, or world sizes that
// disagree with each other or with the number of files, are errors naming the files.
StatusOr<std::vector<TraceFile>> OrderByRank(std::vector<TraceFile> files);

// Each rank's compute actions of its first step, in order (for building a plan of the job
// when none is given).
std::vector<std::vector<Action>> ExecutedComputeOrder(const std::vector<TraceFile>& ranks);

// Each rank's program of its first step as the job ran it: compute actions and torch's own
// transfers where torch put them, each transfer's peer the rank `topology` places the stage
// it moves to or from on. A transfer with no stage on the other side, or one between two
// stages of one rank (torch's runtime makes none), is an error naming the file and event.
StatusOr<std::vector<RankProgram>> ExecutedPrograms(const std::vector<TraceFile>& ranks,
                                                    const Topology& topology);

// `ranks` in rank order (OrderByRank), one per program of `plan`. `step`: the ProfilerStep
// number to choose (default: the median step by makespan). Errors name the file, the rank,
// the step, the position in the rank's program and both tokens.
StatusOr<TraceImport> ImportTorchTraces(const Plan& plan, const std::vector<TraceFile>& ranks,
                                        std::optional<int> step);

}  // namespace pipeplan
