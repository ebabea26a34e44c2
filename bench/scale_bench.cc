// Scale of the whole pipeline: BuildPlan (generate, insert comm, validate incl. the dry run)
// plus Simulate, for every strategy of the catalogue (AllStrategies(), the list `pipeplan
// compare` runs; `auto` is left out, its search is benched in zero_bubble_bench), at three
// sizes whose action counts grow 16x each:
//   small  P=16,  M=256
//   mid    P=64,  M=1024
//   large  P=256, M=4096
// at V = 4, or the largest of 4, 2, 1 the strategy accepts (CheckApplicable; every V refused
// is printed before the run). Uniform costs: F=1, B=2, I=W=1, comm latency 0.05; default
// memory model. A size the planner itself refuses (e.g. M >= 2P, even P) is reported as an
// error with the planner's message, never left out silently.
//
// Every case runs in a forked child (one per iteration), so peak memory is that case's own:
// the child resets its high-water mark (/proc/self/clear_refs), plans and simulates, and
// sends back the wall times and VmHWM through a pipe; the parent checks them against wait4's
// ru_maxrss. A child that runs past kCaseLimitSeconds is killed and reported.
//
// Budgets, per action (compute + comm actions of the plan), for every case:
//   time    1.0 us per action (BuildPlan + Simulate wall time / actions)
//   memory  200 bytes per action ((peak RSS - RSS at fork) / actions)
// Why per action: every pass (generate, list schedule, comm insertion, structure checks, dry
// run, simulation) visits each action a bounded number of times (callgrind: ~1060
// instructions per action for interleaved-1f1b at every size from 97 k to 1.6 M actions), and
// a plan and its timeline hold a fixed number of bytes per action, so both must be linear in
// the number of actions.
// Time: ~1.5x the slowest figure of every strategy but v-half and v-min over three runs at
// P=256, M=4096 (0.65 us per action; the others 0.3-0.5; docs/reliability.md, "Scale"):
// headroom for the 2-core VM, whose wall times drift by ~20% and rise under a concurrent
// build, and for the page faults of multi-GB runs (up to ~45% of the largest cases' wall time
// is the kernel mapping fresh pages).
// Memory: an Action is 32 bytes in the plan, its ActionTiming 24 in the timeline, and each
// compute action (about a third of all) adds 2 memory samples of 16 bytes: ~67 bytes per
// action resident, up to ~2x that while a vector grows by doubling, plus what the passes hold
// while they run (compute order, list schedule, the dry run's per-link counters). Measured:
// 83-101 bytes per action at P=256, M=4096 and up to 140 at the small size; 200 is the model's
// upper end.
//
// Growth check, per strategy, on the large case: (user CPU us per action, large) / (the
// same, mid), and the same for bytes per action. Actions grow 16x from mid to large; a linear
// pass keeps the ratio near 1 and an n log n one near log(16n)/log(n) (~1.2 here), while a
// part quadratic in P makes it ~4x and one quadratic in P x M ~16x. The bound is 2x: over it
// the label says "QUADRATIC?". User CPU rather than wall time, because the kernel's share
// grows with the footprint, not with the algorithm: a page fault costs more once a multi-GB
// run reaches guest memory the host has not backed yet (docs/benchmarks.md, "Where the time
// goes"). The wall-time ratio is printed next to it. The ratio
// needs the mid case in the same run (else "growth n/a").
//
// Counters: actions, ms (mean wall per iteration: plan + simulate), plan_ms, sim_ms, user_ms
// and sys_ms (CPU), us_per_action (wall), peak_MB (child's VmHWM), wait4_MB (its ru_maxrss),
// B_per_action, growth_user, growth_wall, growth_mem; the label carries the verdicts. v-half and
// v-min, whose greedy reordering runs up to three simulations of the whole step, are the
// slowest (their figures: docs/benchmarks.md, "Scale").
//
// The whole run takes ~3.5 minutes on the 2-core VM (the large cases take 2-46 s each). A quick
// run without the large cases takes ~30 s:
//   scale_bench --benchmark_filter='/(small|mid)/'
// One strategy: scale_bench --benchmark_filter='Scale/zbv/'.
#include <benchmark/benchmark.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/strategy.h"
#include "unit_costs.h"

namespace pipeplan {
namespace {

constexpr double kBudgetUsPerAction = 1.0;
constexpr double kBudgetBytesPerAction = 200.0;
constexpr double kGrowthBound = 2.0;
// A case that runs this long is killed: 4x the time budget of the largest case (~30 M actions).
constexpr int kCaseLimitSeconds = 120;

struct Size {
  const char* name;
  int ranks;
  int microbatches;
  int iterations;  // forks per case; the large case runs once
};
constexpr std::array<Size, 3> kSizes = {{
    {"small", 16, 256, 5},
    {"mid", 64, 1024, 3},
    {"large", 256, 4096, 1},
}};

PlanRequest ScaleRequest(const Strategy& strategy, int stages_per_rank, const Size& size) {
  PlanRequest request;
  request.strategy = std::string(strategy.name);
  request.topology.ranks = size.ranks;
  request.topology.stages_per_rank = stages_per_rank;
  request.topology.microbatches = size.microbatches;
  request.topology.placement = strategy.placement;
  request.costs = bench::UnitCosts();
  return request;
}

// What the child sends back: plain data, written with one write().
struct ChildReport {
  bool ok = false;
  double plan_ms = 0;
  double simulate_ms = 0;
  double user_ms = 0;  // CPU time of plan + simulate, in user mode and in the kernel
  double system_ms = 0;
  int64_t actions = 0;
  int64_t rss_at_start_kb = 0;  // before planning (the pages shared with the parent)
  int64_t peak_rss_kb = 0;      // VmHWM after Simulate
  std::array<char, 480> error{};
};

// "VmHWM:    1234 kB" -> 1234; -1 when absent.
int64_t ReadStatusKb(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::string prefix = std::string(field) + ":";
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false when the kernel refuses.
bool ResetPeakRss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

double Milliseconds(const timeval& time) {
  return 1000.0 * static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) / 1000.0;
}

void SetError(ChildReport& report, const std::string& message) {
  std::snprintf(report.error.data(), report.error.size(), "%s", message.c_str());
}

// The child's work: plan, simulate, measure.
ChildReport RunInChild(const PlanRequest& request) {
  ChildReport report;
  if (!ResetPeakRss()) {
    SetError(report, "cannot reset the peak RSS (/proc/self/clear_refs)");
    return report;
  }
  report.rss_at_start_kb = ReadStatusKb("VmRSS");
  rusage usage_at_start{};
  getrusage(RUSAGE_SELF, &usage_at_start);
  const auto start = std::chrono::steady_clock::now();
  StatusOr<Plan> plan = BuildPlan(request);
  const auto planned = std::chrono::steady_clock::now();
  if (!plan.ok()) {
    SetError(report, "refused by the planner: " + plan.status().message());
    return report;
  }
  StatusOr<Timeline> timeline = Simulate(*plan);
  const auto simulated = std::chrono::steady_clock::now();
  if (!timeline.ok()) {
    SetError(report, "Simulate failed: " + timeline.status().message());
    return report;
  }
  benchmark::DoNotOptimize(timeline->metrics.makespan);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  report.user_ms = Milliseconds(usage.ru_utime) - Milliseconds(usage_at_start.ru_utime);
  report.system_ms = Milliseconds(usage.ru_stime) - Milliseconds(usage_at_start.ru_stime);
  report.peak_rss_kb = ReadStatusKb("VmHWM");
  for (const RankProgram& program : plan->programs) {
    report.actions += static_cast<int64_t>(program.actions.size());
  }
  report.plan_ms = std::chrono::duration<double, std::milli>(planned - start).count();
  report.simulate_ms = std::chrono::duration<double, std::milli>(simulated - planned).count();
  report.ok = true;
  return report;
}

// Forks, runs the case in the child and collects its report; on failure the report's error
// says what happened. `max_rss_kb` is wait4's ru_maxrss of the child.
ChildReport RunForked(const PlanRequest& request, int64_t& max_rss_kb) {
  ChildReport report;
  std::array<int, 2> fds{};
  if (pipe(fds.data()) != 0) {
    SetError(report, std::string("pipe: ") + std::strerror(errno));
    return report;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    SetError(report, std::string("fork: ") + std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return report;
  }
  if (pid == 0) {
    close(fds[0]);
    const ChildReport child = RunInChild(request);
    const ssize_t written = write(fds[1], &child, sizeof(child));
    _exit(written == static_cast<ssize_t>(sizeof(child)) ? 0 : 1);
  }
  close(fds[1]);
  // Wait for the report, at most kCaseLimitSeconds.
  pollfd readable{fds[0], POLLIN, 0};
  const int ready = poll(&readable, 1, kCaseLimitSeconds * 1000);
  bool received = false;
  if (ready > 0) {
    size_t got = 0;
    auto* bytes = reinterpret_cast<char*>(&report);
    while (got < sizeof(report)) {
      const ssize_t n = read(fds[0], bytes + got, sizeof(report) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    received = got == sizeof(report);
  } else {
    kill(pid, SIGKILL);
  }
  close(fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  max_rss_kb = usage.ru_maxrss;
  if (received) return report;
  report = ChildReport{};
  if (ready == 0) {
    SetError(report, "did not finish within " + std::to_string(kCaseLimitSeconds) +
                         " s (killed); QUADRATIC?");
  } else if (WIFSIGNALED(status)) {
    SetError(report,
             "the child died of signal " + std::to_string(WTERMSIG(status)) + " (out of memory?)");
  } else {
    SetError(report, "the child exited with status " + std::to_string(WEXITSTATUS(status)) +
                         " without a report");
  }
  return report;
}

// Per-action figures of a finished case.
struct CaseFigures {
  double us_per_action = 0;       // wall
  double user_us_per_action = 0;  // user-mode CPU
  double bytes_per_action = 0;
};
// Mid-size figures per strategy, for the growth check of the large case.
std::map<std::string, CaseFigures>& MidFigures() {
  static std::map<std::string, CaseFigures> figures;
  return figures;
}

std::string Format(const char* format, double value) {
  std::array<char, 64> text{};
  std::snprintf(text.data(), text.size(), format, value);
  return text.data();
}

void BM_Scale(benchmark::State& state, const Strategy* strategy, int stages_per_rank, Size size) {
  const PlanRequest request = ScaleRequest(*strategy, stages_per_rank, size);
  double plan_ms = 0;
  double simulate_ms = 0;
  double user_ms = 0;
  double system_ms = 0;
  int64_t actions = 0;
  int64_t plan_rss_kb = 0;  // largest peak - RSS at start over the iterations
  int64_t peak_rss_kb = 0;
  int64_t wait4_rss_kb = 0;
  for (auto _ : state) {
    int64_t max_rss_kb = 0;
    const ChildReport report = RunForked(request, max_rss_kb);
    if (!report.ok) {
      state.SkipWithError(report.error.data());
      return;
    }
    state.SetIterationTime((report.plan_ms + report.simulate_ms) / 1000.0);
    plan_ms += report.plan_ms;
    simulate_ms += report.simulate_ms;
    user_ms += report.user_ms;
    system_ms += report.system_ms;
    actions = report.actions;
    plan_rss_kb = std::max(plan_rss_kb, report.peak_rss_kb - report.rss_at_start_kb);
    peak_rss_kb = std::max(peak_rss_kb, report.peak_rss_kb);
    wait4_rss_kb = std::max(wait4_rss_kb, max_rss_kb);
  }
  const double iterations = static_cast<double>(state.iterations());
  const double ms = (plan_ms + simulate_ms) / iterations;
  const double per_action = 1.0 / static_cast<double>(actions);
  const CaseFigures figures{1000.0 * ms * per_action, 1000.0 * user_ms / iterations * per_action,
                            1024.0 * static_cast<double>(plan_rss_kb) * per_action};
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["ms"] = ms;
  state.counters["plan_ms"] = plan_ms / iterations;
  state.counters["sim_ms"] = simulate_ms / iterations;
  state.counters["user_ms"] = user_ms / iterations;
  state.counters["sys_ms"] = system_ms / iterations;
  state.counters["us_per_action"] = figures.us_per_action;
  state.counters["peak_MB"] = static_cast<double>(peak_rss_kb) / 1024.0;
  state.counters["wait4_MB"] = static_cast<double>(wait4_rss_kb) / 1024.0;
  state.counters["B_per_action"] = figures.bytes_per_action;

  const bool time_ok = figures.us_per_action <= kBudgetUsPerAction;
  const bool memory_ok = figures.bytes_per_action <= kBudgetBytesPerAction;
  std::string label = "budget " + Format("%.1f", kBudgetUsPerAction) + " us, " +
                      Format("%.0f", kBudgetBytesPerAction) +
                      " B per action: " + (time_ok && memory_ok ? "within budget" : "OVER BUDGET");
  if (!time_ok) label += " (time)";
  if (!memory_ok) label += " (memory)";
  // wait4 sees the child's whole life, so it can only be at or above VmHWM.
  if (wait4_rss_kb + 1024 < peak_rss_kb) label += "; wait4 ru_maxrss below VmHWM?";
  const std::string name(strategy->name);
  if (std::string(size.name) == "mid") MidFigures()[name] = figures;
  if (std::string(size.name) == "large") {
    const auto mid = MidFigures().find(name);
    if (mid == MidFigures().end()) {
      label += "; growth n/a (mid case not run)";
    } else {
      const double time_growth = figures.user_us_per_action / mid->second.user_us_per_action;
      const double wall_growth = figures.us_per_action / mid->second.us_per_action;
      const double memory_growth = figures.bytes_per_action / mid->second.bytes_per_action;
      state.counters["growth_user"] = time_growth;
      state.counters["growth_wall"] = wall_growth;
      state.counters["growth_mem"] = memory_growth;
      const bool linear = time_growth < kGrowthBound && memory_growth < kGrowthBound;
      label += "; growth per action mid->large x" + Format("%.2f", time_growth) +
               " user CPU (wall x" + Format("%.2f", wall_growth) + "), x" +
               Format("%.2f", memory_growth) + " memory (bound " + Format("%.0f", kGrowthBound) +
               "): " + (linear ? "linear" : "QUADRATIC?");
    }
  }
  state.SetLabel(label);
}

// The V a strategy is benched at: 4, or the largest of 2 and 1 it accepts. Prints, for a
// strategy not run at V=4, the planner's reason.
std::optional<int> ScaleStagesPerRank(const Strategy& strategy) {
  std::string refused;
  for (const int v : {4, 2, 1}) {
    Topology topology;
    topology.ranks = kSizes.back().ranks;
    topology.stages_per_rank = v;
    topology.microbatches = kSizes.back().microbatches;
    topology.placement = strategy.placement;
    const Status applicable = CheckApplicable(strategy, topology);
    if (applicable.ok()) {
      if (!refused.empty()) {
        std::printf("scale_bench: %s runs at V=%d; %s\n", std::string(strategy.name).c_str(), v,
                    refused.c_str());
      }
      return v;
    }
    if (refused.empty()) refused = "V=" + std::to_string(v) + " refused: " + applicable.message();
  }
  std::printf("scale_bench: %s left out: %s\n", std::string(strategy.name).c_str(),
              refused.c_str());
  return std::nullopt;
}

void RegisterScaleBenchmarks() {
  for (const Strategy& strategy : AllStrategies()) {
    const std::optional<int> v = ScaleStagesPerRank(strategy);
    if (!v.has_value()) continue;  // printed above
    for (const Size& size : kSizes) {
      const std::string name = "BM_Scale/" + std::string(strategy.name) + "/" + size.name +
                               "/P=" + std::to_string(size.ranks) + ",V=" + std::to_string(*v) +
                               ",M=" + std::to_string(size.microbatches);
      benchmark::RegisterBenchmark(name.c_str(), BM_Scale, &strategy, *v, size)
          ->Iterations(size.iterations)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace pipeplan

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  pipeplan::RegisterScaleBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
