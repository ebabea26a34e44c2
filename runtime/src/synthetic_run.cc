#include "pipeplan/runtime/synthetic_run.h"

#include <memory>

#include "pipeplan/runtime/inproc_transport.h"

namespace pipeplan::runtime {

StatusOr<std::vector<Timeline>> RunSyntheticInProcess(const Plan& plan,
                                                      const SyntheticOptions& synthetic,
                                                      const LocalRunOptions& options,
                                                      const std::optional<Fault>& fault) {
  const int ranks = static_cast<int>(plan.programs.size());
  const std::vector<std::unique_ptr<Transport>> transports = MakeInProcTransports(ranks);
  std::vector<std::unique_ptr<OpExecutor>> executors;
  std::vector<OpExecutor*> executor_ptrs;
  std::vector<Transport*> transport_ptrs;
  for (int r = 0; r < ranks; ++r) {
    executors.push_back(std::make_unique<SyntheticExecutor>(plan, RankId(r), synthetic));
    if (fault) {
      executors.back() =
          std::make_unique<FaultInjectingExecutor>(std::move(executors.back()), RankId(r), *fault);
    }
    executor_ptrs.push_back(executors.back().get());
    transport_ptrs.push_back(transports[r].get());
  }
  return RunLocal(plan, executor_ptrs, transport_ptrs, options);
}

}  // namespace pipeplan::runtime
