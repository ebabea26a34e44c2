// Whole-pipeline cost of planning the zero-bubble schedules and of the `auto` search: BuildPlan
// (generate, insert comm, post-validation with its rollback tags where asked, validate incl.
// the dry run and the memory-limit check). No Simulate: the budgets are for planning.
//
// Budgets (one CPU core):
//   zbv, P=32, M=256, post-validation on        20 ms
//   zb-2p (limit 2P activations), P=32, M=256   20 ms
//   auto, P=8, M=64 (every strategy/setting)     1 s
// Costs are the Zero Bubble seed's P=32 setting: per chunk F=9458, I=9748, W=7288 (B = I + W),
// comm latency 879, activation per chunk 34h + 5as with h=6144, a=48, s=1024, of which I frees
// 2h + 5as (W the remaining 32h). zbv runs under its default limit (2P chunk activations).
// The "ms" counter is the mean wall time per iteration and "budget_ms" the budget; the label
// says "within budget" or "OVER BUDGET". The zbv case also counts the receives tagged
// rollback, which must be (P-1)^2 ("rollback_expected").
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/plan_util.h"
#include "pipeplan/passes/post_validation.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {
namespace {

// The seed's P=32, M=256 row (per chunk).
constexpr double kForward = 9458;
constexpr double kInput = 9748;
constexpr double kWeight = 7288;
constexpr double kLatency = 879;
constexpr double kHidden = 6144;
constexpr double kHeads = 48;
constexpr double kSeq = 1024;
constexpr double kActivation = 34 * kHidden + 5 * kHeads * kSeq;
constexpr double kFreedByInput = 2 * kHidden + 5 * kHeads * kSeq;

PlanRequest SeedRequest(const std::string& strategy, int ranks, int stages_per_rank,
                        int microbatches) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = microbatches;
  StageCosts stage;
  stage.forward = kForward;
  stage.backward_input = kInput;
  stage.backward_weight = kWeight;
  stage.backward = kInput + kWeight;
  request.costs.stages = {stage};
  BoundaryCosts boundary;
  boundary.latency = kLatency;
  request.costs.boundaries = {boundary};
  StageMemory memory;
  memory.activation = kActivation;
  memory.freed_by_input = kFreedByInput;
  request.memory.stages = {memory};
  return request;
}

// Runs BuildPlan per iteration and sets the "ms" counter; returns the last plan, or nullopt
// after reporting an error through `state`.
std::optional<Plan> RunBuildPlan(benchmark::State& state, const PlanRequest& request) {
  double total_ms = 0;
  std::optional<Plan> last;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<Plan> plan = BuildPlan(request);
    const auto end = std::chrono::steady_clock::now();
    if (!plan.ok()) {
      state.SkipWithError(plan.status().message().c_str());
      return std::nullopt;
    }
    benchmark::DoNotOptimize(plan->programs.data());
    total_ms += std::chrono::duration<double, std::milli>(end - start).count();
    last = std::move(*plan);
  }
  if (!last.has_value()) return std::nullopt;
  size_t actions = 0;
  for (const RankProgram& program : last->programs) actions += program.actions.size();
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["ms"] = benchmark::Counter(total_ms, benchmark::Counter::kAvgIterations);
  return last;
}

// Sets "budget_ms" and the label from the "ms" counter; `extra` is appended to the label.
void LabelBudget(benchmark::State& state, double budget_ms, const std::string& budget_text,
                 const std::string& extra = "") {
  if (state.iterations() == 0) return;
  const double mean_ms = state.counters["ms"].value / static_cast<double>(state.iterations());
  state.counters["budget_ms"] = budget_ms;
  state.SetLabel("budget " + budget_text + ": " +
                 (mean_ms <= budget_ms ? "within budget" : "OVER BUDGET") + extra);
}

// zbv, P=32, V=2, M=256, post-validation on, default limit (2P chunk activations).
void BM_Budget_Zbv_PostValidation_P32_M256(benchmark::State& state) {
  constexpr int kRanks = 32;
  PlanRequest request = SeedRequest("zbv", kRanks, 2, 256);
  request.options.post_validation = true;
  const std::optional<Plan> plan = RunBuildPlan(state, request);
  if (!plan.has_value()) return;
  const int rollbacks = CountRollbackReceives(*plan);
  constexpr int kExpected = (kRanks - 1) * (kRanks - 1);
  state.counters["rollback_recvs"] = rollbacks;
  state.counters["rollback_expected"] = kExpected;
  LabelBudget(state, 20.0, "20 ms", rollbacks == kExpected ? "" : "; rollback receives != (P-1)^2");
}
BENCHMARK(BM_Budget_Zbv_PostValidation_P32_M256)->Unit(benchmark::kMillisecond)->UseRealTime();

// zb-2p (ZB greedy with a limit of 2P activations), P=32, V=1, M=256.
void BM_Budget_Zb2p_P32_M256(benchmark::State& state) {
  const std::optional<Plan> plan = RunBuildPlan(state, SeedRequest("zb-2p", 32, 1, 256));
  if (!plan.has_value()) return;
  LabelBudget(state, 20.0, "20 ms");
}
BENCHMARK(BM_Budget_Zb2p_P32_M256)->Unit(benchmark::kMillisecond)->UseRealTime();

// auto over every strategy and setting, P=8, M=64. The seed's per-chunk costs at V=2 describe
// the share (auto scales them per candidate); memory in the default unit (1/V of a share per
// stage) with no limit, so the activation figures follow each candidate's V.
void BM_Budget_Auto_P8_M64(benchmark::State& state) {
  PlanRequest request = SeedRequest(std::string(kAutoStrategy), 8, 2, 64);
  request.memory = MemoryModel{};
  double total_ms = 0;
  size_t candidates = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<AutoResult> result = AutoSearch(request);
    const auto end = std::chrono::steady_clock::now();
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(result->best.plan.programs.data());
    total_ms += std::chrono::duration<double, std::milli>(end - start).count();
    candidates = result->candidates.size();
  }
  state.counters["candidates"] = static_cast<double>(candidates);
  state.counters["ms"] = benchmark::Counter(total_ms, benchmark::Counter::kAvgIterations);
  LabelBudget(state, 1000.0, "1 s");
}
BENCHMARK(BM_Budget_Auto_P8_M64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
