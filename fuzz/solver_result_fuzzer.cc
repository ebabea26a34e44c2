// Fuzz target: the optimal strategies' side of the CP-SAT solver, without running it: the
// instance JSON pipeplan writes for python/pipeplan_solver.py, the result text it reads back,
// and what BuildOptimalPlan makes of the answer (the order from the start times, the periodic
// expansion of a steady state, the memory-limit search). The first 3 bytes choose the request
// (optimal at V = 1 or 2, optimal-v or optimal-fb; P in 1..3, M in 1..6; --periodic; a memory
// limit); the rest is the solver's result text, one per solve in the order BuildOptimalPlan
// asks, split by 0x00 bytes (the last one answers every later solve). Every instance must be
// valid JSON; a plan BuildOptimalPlan returns must simulate to its own finite timeline and be
// no slower than the best heuristic it reports.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/formats/solver_files.h"
#include "pipeplan/planner/optimal.h"

namespace {

using namespace pipeplan;

constexpr size_t kHeaderBytes = 3;

struct Choice {
  PlanRequest request;
  OptimalOptions options;
};

// byte 0: bits 0-1 the strategy (optimal V=1, optimal V=2, optimal-v, optimal-fb), bit 2
// --periodic, bit 3 a memory limit; byte 1: P = 1 + b % 3, M = 1 + b / 3 % 6; byte 2: the
// limit, (1 + b % 16) / 2 microbatch activations (0.5 to 8).
Choice ChoiceOf(const uint8_t* header) {
  struct Variant {
    const char* strategy;
    int stages_per_rank;
  };
  static constexpr Variant kVariants[] = {
      {"optimal", 1}, {"optimal", 2}, {"optimal-v", 2}, {"optimal-fb", 1}};
  const Variant& variant = kVariants[header[0] & 3];
  Choice choice;
  choice.request = fuzz::MakeRequest(variant.strategy, 1 + header[1] % 3, 1 + header[1] / 3 % 6,
                                     variant.stages_per_rank);
  if ((header[0] & 8) != 0) choice.request.memory.limit = (1 + header[2] % 16) / 2.0;
  choice.options.periodic = (header[0] & 4) != 0;
  choice.options.time_limit_s = 1;
  return choice;
}

// The result texts, split at each 0x00 byte.
std::vector<std::string_view> SplitResults(std::string_view text) {
  std::vector<std::string_view> results;
  while (true) {
    const size_t split = text.find('\0');
    results.push_back(text.substr(0, split));
    if (split == std::string_view::npos) return results;
    text.remove_prefix(split + 1);
  }
}

// Stands in for RunCpSat: writes the instance as RunCpSat does, answers with the next result.
SolveFn AnswerWith(const std::vector<std::string_view>& results, size_t& next) {
  return [&results, &next](const SolverInstance& instance) -> StatusOr<SolverOutcome> {
    PIPEPLAN_FUZZ_CHECK(fuzz::IsJson(SolverInstanceJson(instance)));
    const std::string_view result = results[std::min(next++, results.size() - 1)];
    return ParseSolverOutcome(result, instance.ops.size());
  };
}

void CheckOptimalPlan(const OptimalPlan& made) {
  fuzz::CheckTimeline(made.timeline);
  const StatusOr<Timeline> simulated = Simulate(made.plan);
  PIPEPLAN_FUZZ_CHECK_OK(simulated.status());
  PIPEPLAN_FUZZ_CHECK(simulated->metrics.makespan == made.timeline.metrics.makespan);
  if (made.best_heuristic_makespan > 0) {
    PIPEPLAN_FUZZ_CHECK(made.timeline.metrics.makespan <= made.best_heuristic_makespan);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  const Choice choice = ChoiceOf(data);
  const std::vector<std::string_view> results =
      SplitResults(fuzz::AsText(data + kHeaderBytes, size - kHeaderBytes));
  size_t next = 0;
  const StatusOr<OptimalPlan> made =
      BuildOptimalPlan(choice.request, choice.options, AnswerWith(results, next));
  if (made.ok()) CheckOptimalPlan(*made);
  return 0;
}
