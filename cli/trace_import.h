// 'pipeplan import --format torch-trace': torch.profiler traces of a torch pipelining job,
// one per rank, to a measured timeline file of the plan the job ran.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/app/request_flags.h"
#include "pipeplan/model/status.h"

namespace pipeplan::cli {

struct TraceImportOptions {
  std::vector<std::string> traces;  // one per rank
  std::optional<std::string> plan;  // the plan the job ran; else its executed compute order
  std::optional<int> step;          // ProfilerStep number to write; else the median
  std::string strategy_name = "imported";
  app::CostFlags costs;  // for the plan built without --plan
  std::optional<std::string> output;
  std::optional<std::string> plan_output;  // also write the plan the traces were matched to
};

Status ExecuteTraceImport(const TraceImportOptions& options);

}  // namespace pipeplan::cli
