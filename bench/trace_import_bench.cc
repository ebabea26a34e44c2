// Importing torch.profiler traces: 4 ranks' traces of about 50 MB each (a real job's size:
// a few hundred thousand events, mostly operators, launches and memory events around the
// "PP:" action ranges), parsed and matched to their plan as 'pipeplan import --format
// torch-trace' does, from JSON already in memory (reading and inflating the files is apart).
//
// Budget: 2 s for the 4 traces. The traces are made here in Kineto's layout: 1f1b at P = 4,
// M = 32, every compute action with 40 operators and 8 memory events, steps until the file
// passes 50 MB.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/measurement/import_trace.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan {
namespace {

constexpr double kBudgetSeconds = 2.0;
constexpr size_t kTraceBytes = 50u << 20;
constexpr int kOperatorsPerAction = 40;
constexpr int kMemoryEventsPerAction = 8;

void Append(std::string& out, const std::string& event) {
  if (out.back() != '[') out += ",\n";
  out += event;
}

std::string Range(const char* cat, const std::string& name, double ts, double dur, int id) {
  return R"({"ph": "X", "cat": ")" + std::string(cat) + R"(", "name": ")" + name +
         R"(", "pid": 4242, "tid": 4242, "ts": )" + std::to_string(ts) + R"(, "dur": )" +
         std::to_string(dur) + R"(, "args": {"External id": )" + std::to_string(id) +
         R"(, "Record function id": 0, "Ev Idx": )" + std::to_string(id) + "}}";
}

std::string Memory(double ts, double total, int id) {
  return R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, )"
         R"("tid": 4242, "ts": )" +
         std::to_string(ts) + R"(, "args": {"Total Reserved": 2097152000, "Total Allocated": )" +
         std::to_string(total) +
         R"(, "Bytes": 4096, "Addr": 94809094184704, "Device Id": -1, )"
         R"("Device Type": 0, "Ev Idx": )" +
         std::to_string(id) + "}}";
}

// One rank's trace: its program's timeline from `timeline`, repeated step after step.
std::string MakeTrace(const Plan& plan, const Timeline& timeline, int rank) {
  std::string out = R"({"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": )" +
                    std::to_string(rank) + R"(, "world_size": 4}, "traceEvents": [)";
  const RankProgram& program = plan.programs[rank];
  const double period = timeline.metrics.makespan + 100.0;
  int id = 0;
  for (int step = 0; out.size() < kTraceBytes; ++step) {
    const double base = 1e6 + step * period;
    Append(out, Range("user_annotation", "ProfilerStep#" + std::to_string(step), base - 10,
                      period - 20, ++id));
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const ActionTiming& t = timeline.ranks[rank].actions[i];
      const double start = base + t.start;
      const double dur = t.end - t.start;
      Append(out, Range("user_annotation", "PP:" + ToString(program.actions[i]), start, dur, ++id));
      if (!IsCompute(program.actions[i].kind)) continue;
      for (int k = 0; k < kOperatorsPerAction; ++k) {
        Append(out, Range("cpu_op", "aten::addmm", start + dur * k / kOperatorsPerAction,
                          dur / kOperatorsPerAction / 2, ++id));
      }
      for (int k = 0; k < kMemoryEventsPerAction; ++k) {
        Append(out, Memory(start + dur * k / kMemoryEventsPerAction, 1e9 + k * 4096.0, ++id));
      }
    }
  }
  return out + "]}";
}

void BM_Budget_ImportFourTracesOf50MB(benchmark::State& state) {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology.ranks = 4;
  request.topology.microbatches = 32;
  request.costs.stages.assign(4, {.forward = 1000, .backward = 2000});
  const StatusOr<Plan> plan = BuildPlan(request);
  const StatusOr<Timeline> timeline = plan.ok() ? Simulate(*plan) : plan.status();
  if (!timeline.ok()) {
    state.SkipWithError(timeline.status().message().c_str());
    return;
  }
  std::vector<std::string> traces;
  size_t bytes = 0;
  for (int r = 0; r < 4; ++r) {
    traces.push_back(MakeTrace(*plan, *timeline, r));
    bytes += traces.back().size();
  }
  size_t steps = 0;
  double total = 0.0;
  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    std::vector<TraceFile> files;
    for (int r = 0; r < 4; ++r) {
      StatusOr<TorchTrace> trace = ParseTorchTrace(traces[r]);
      if (!trace.ok()) {
        state.SkipWithError(trace.status().message().c_str());
        return;
      }
      files.push_back({"rank" + std::to_string(r), *std::move(trace)});
    }
    const StatusOr<TraceImport> imported = ImportTorchTraces(*plan, files, std::nullopt);
    if (!imported.ok()) {
      state.SkipWithError(imported.status().message().c_str());
      return;
    }
    steps = imported->steps.size();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    state.SetIterationTime(seconds);
    total += seconds;
  }
  const double mean = total / static_cast<double>(state.iterations());
  state.SetLabel(mean <= kBudgetSeconds ? "budget 2 s: within budget" : "budget 2 s: OVER BUDGET");
  state.counters["MB_per_trace"] = static_cast<double>(bytes) / 4 / (1 << 20);
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["budget_s"] = kBudgetSeconds;
}
BENCHMARK(BM_Budget_ImportFourTracesOf50MB)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseManualTime();

}  // namespace
}  // namespace pipeplan

BENCHMARK_MAIN();
