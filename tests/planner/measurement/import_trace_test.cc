// ImportTorchTraces: traces written here from a known timeline import to that timeline;
// steps, ranks, memory and the errors for traces that do not fit their plan; and a real GPU
// trace (examples/traces/h200_interleaved_zb_rank0.json.gz, see its README.md).
#include "pipeplan/measurement/import_trace.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;

// Writes one rank's trace as torch's runtime and Kineto would for `steps` repetitions of the
// rank's timeline in `timeline` (its times taken as microseconds), each step `period` after
// the previous one and marked by a ProfilerStep range. Torch's runtime has no receive ranges
// that last: a receive's range here is its post, [start, start + 1].
struct TraceWriter {
  const Plan& plan;
  const Timeline& timeline;
  int steps = 2;
  double period = 1000.0;
  std::optional<int> rank_info = std::nullopt;  // distributedInfo.rank (else none)
  int world_size = 0;
  bool memory = false;  // a [memory] event at each compute action's start and end
  // With memory: the rank's last F of each step also allocates 40 bytes that the next step's
  // first F frees (as torch holds a local stage's input until the next step overwrites it).
  bool held_over = false;
  std::vector<std::string> metadata = {};  // per rank: top-level members, as pipeplan_profiler's

  std::string Write(int rank) const {
    std::ostringstream out;
    out << "{\"schemaVersion\": 1, ";
    if (static_cast<size_t>(rank) < metadata.size()) out << metadata[rank] << ", ";
    if (rank_info.has_value()) {
      out << "\"distributedInfo\": {\"backend\": \"gloo\", \"rank\": " << *rank_info
          << ", \"world_size\": " << world_size << "}, ";
    }
    out << "\"traceEvents\": [";
    bool first = true;
    const auto event = [&](const std::string& text) {
      out << (first ? "" : ",\n") << text;
      first = false;
    };
    const RankProgram& program = plan.programs[rank];
    for (int s = 0; s < steps; ++s) {
      const double base = 100.0 + s * period;
      event(Range("ProfilerStep#" + std::to_string(s + 1), base - 50.0, period - 100.0));
      const auto forwards = [&](size_t from, size_t to) {
        return std::count_if(program.actions.begin() + from, program.actions.begin() + to,
                             [](const Action& a) { return a.kind == ActionKind::kForward; });
      };
      const bool held = held_over && memory;
      double allocated = 1000.0 + (held && s > 0 ? 40.0 : 0.0);
      for (size_t i = 0; i < program.actions.size(); ++i) {
        const Action& action = program.actions[i];
        const ActionTiming& t = timeline.ranks[rank].actions[i];
        const bool receive =
            action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward;
        const double start = base + t.start;
        const double duration = receive ? 1.0 : t.end - t.start;
        event(Range("PP:" + ToString(action), start, duration));
        // Its work (an operator) starts with it: it never waits for its input.
        if (IsCompute(action.kind)) event(Operator(start, duration));
        if (memory && IsCompute(action.kind)) {
          // Each F keeps 100 bytes and peaks 50 above that inside; each B frees its 100.
          const bool forward = action.kind == ActionKind::kForward;
          if (held && forward && s > 0 && forwards(0, i) == 0) {
            allocated -= 40.0;
            event(Memory(start + 0.25, allocated, -40.0, 7000 + s - 1));
          }
          const double peak = allocated + (forward ? 150.0 : 20.0);
          event(Memory(start + 0.5, peak, peak - allocated));
          allocated += forward ? 100.0 : -100.0;
          event(Memory(start + duration - 0.5, allocated, allocated - peak));
          if (held && forward && forwards(i + 1, program.actions.size()) == 0) {
            allocated += 40.0;
            event(Memory(start + duration - 0.25, allocated, 40.0, 7000 + s));
          }
        }
      }
    }
    out << "]}";
    return out.str();
  }

  static std::string Range(const std::string& name, double ts, double dur) {
    std::ostringstream e;
    e.precision(17);
    e << R"({"ph": "X", "cat": "user_annotation", "name": ")" << name
      << R"(", "pid": 5, "tid": 5, "ts": )" << ts << ", \"dur\": " << dur << "}";
    return e.str();
  }
  static std::string Operator(double ts, double dur) {
    std::ostringstream e;
    e.precision(17);
    e << R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": )" << ts
      << ", \"dur\": " << dur << "}";
    return e.str();
  }
  static std::string Memory(double ts, double allocated, double bytes,
                            std::optional<int> address = std::nullopt) {
    std::ostringstream e;
    e.precision(17);
    e << R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 5, )"
      << R"("tid": 5, "ts": )" << ts << R"(, "args": {"Total Allocated": )" << allocated
      << R"(, "Bytes": )" << bytes;
    if (address.has_value()) e << R"(, "Addr": )" << *address;
    e << R"(, "Device Type": 0}})";
    return e.str();
  }
};

// 1f1b, P = 2, M = 4, with whole-number costs (so every simulated time is a whole number of
// microseconds) and a latency on each transfer.
Plan TestPlan() {
  return BuildOrDie(MakeRequest("1f1b", 2, 4, 1, /*forward=*/30, /*input=*/25, /*weight=*/20,
                                /*comm=*/5));
}

// A plan, its simulated timeline and a writer of traces of it.
struct KnownRun {
  Plan plan = TestPlan();
  Timeline known = testing::SimulateOrDie(plan);
  TraceWriter writer{plan, known};
};

std::vector<TraceFile> Parse(const TraceWriter& writer, int ranks) {
  std::vector<TraceFile> files;
  for (int r = 0; r < ranks; ++r) {
    StatusOr<TorchTrace> trace = ParseTorchTrace(writer.Write(r));
    EXPECT_TRUE(trace.ok()) << trace.status().message();
    files.push_back({"rank" + std::to_string(r) + ".json", trace.ok() ? *trace : TorchTrace{}});
  }
  return files;
}

TEST(ImportTrace, AKnownTimelineComesBackWithItsDurations) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->clock, OpClock::kProfilerHost);
  ASSERT_EQ(imported->steps.size(), 2u);
  EXPECT_EQ(imported->steps[0].number, 1);
  EXPECT_EQ(imported->steps[1].number, 2);
  for (const ImportedStep& step : imported->steps) {
    const Timeline& got = step.timeline;
    EXPECT_EQ(got.source, TimelineSource::kMeasured);
    EXPECT_EQ(got.metrics.makespan, known.metrics.makespan);
    for (size_t r = 0; r < plan.programs.size(); ++r) {
      const RankProgram& program = plan.programs[r];
      EXPECT_EQ(got.ranks[r].clock, OpClock::kProfilerHost);
      EXPECT_TRUE(got.ranks[r].action_memory.empty());  // the trace had no memory events
      for (size_t i = 0; i < program.actions.size(); ++i) {
        const Action& action = program.actions[i];
        const ActionTiming& want = known.ranks[r].actions[i];
        const ActionTiming& have = got.ranks[r].actions[i];
        SCOPED_TRACE(Where(static_cast<int>(r), i, action));
        EXPECT_EQ(have.start, want.start);
        if (action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward) {
          // The data arrived by the time the action that uses it started (all a trace says).
          EXPECT_GE(have.end, want.end);
        } else {
          EXPECT_EQ(have.end, want.end);
        }
        EXPECT_EQ(have.thread, IsCompute(action.kind) ? kComputeThread : kCommThread);
      }
    }
  }
}

// On a GPU the host runs ahead of the kernels by as much as its launch queue holds: a step
// starts at its first kernel, not at the host's first range.
TEST(ImportTrace, ADeviceTimedStepStartsAtItsFirstKernel) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  std::vector<TraceFile> files = Parse(writer, 2);
  for (TraceFile& file : files) {
    for (TraceAction& a : file.trace.actions) {
      a.device_start = a.start + 30000.0;
      a.device_end = a.end + 30000.0;
    }
  }
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->clock, OpClock::kProfilerDevice);
  for (const ImportedStep& step : imported->steps) {
    EXPECT_EQ(step.timeline.metrics.makespan, known.metrics.makespan);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(step.timeline.ranks[r].clock, OpClock::kProfilerDevice);
      EXPECT_EQ(step.timeline.ranks[r].actions.front().start, known.ranks[r].actions.front().start);
    }
  }
}

// Kineto rounds each trace's base to a whole second, so two hosts' traces can disagree by
// one: either rank ahead, the step is the step, not a second long. How much of the gap was the
// clocks and how much a transfer's latency no trace says: the step comes back within one
// latency (5 us here) of the truth.
TEST(ImportTrace, ASecondBetweenRanksBaseClocksIsAlignedAway) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  for (const size_t ahead : {0u, 1u}) {
    SCOPED_TRACE("rank " + std::to_string(ahead) + "'s clock a second ahead");
    std::vector<TraceFile> files = Parse(writer, 2);
    files[ahead].trace.base_nanoseconds += 1'000'000'000;
    const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
    ASSERT_TRUE(imported.ok()) << imported.status().message();
    for (const ImportedStep& step : imported->steps) {
      constexpr double kLatency = 5.0;
      EXPECT_NEAR(step.timeline.metrics.makespan, known.metrics.makespan, kLatency);
      for (size_t r = 0; r < 2; ++r) {
        EXPECT_NEAR(step.timeline.ranks[r].actions.front().start,
                    known.ranks[r].actions.front().start, kLatency);
      }
      // The rank behind moved forward by about the second.
      EXPECT_GT(step.clock_shifts[1 - ahead], 999'000.0);
      EXPECT_EQ(step.clock_shifts[ahead], 0.0);
    }
  }
}

// A base time past what 64-bit nanoseconds hold is named, not overflowed (found by writing
// the torch_trace fuzzer's inputs).
TEST(ImportTrace, ABaseTimePastSixtyFourBitsIsNamed) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  std::vector<TraceFile> files = Parse(writer, 2);
  files[1].trace.base_nanoseconds = std::numeric_limits<int64_t>::max() - 10;
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(
                "rank1.json (rank 1): baseTimeNanoseconds 9223372036854775797 and its first event"),
            std::string::npos)
      << imported.status().message();
}

TEST(ImportTrace, RanksComeFromTheTracesAndMixedJobsAreRefused) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.world_size = 2;
  std::vector<TraceFile> files;
  for (int r : {1, 0}) {  // given in the wrong order
    writer.rank_info = r;
    files.push_back({"r" + std::to_string(r), *ParseTorchTrace(writer.Write(r))});
  }
  StatusOr<std::vector<TraceFile>> ordered = OrderByRank(files);
  ASSERT_TRUE(ordered.ok()) << ordered.status().message();
  EXPECT_EQ((*ordered)[0].name, "r0");
  EXPECT_EQ((*ordered)[1].name, "r1");

  files[0].trace.rank = 0;  // two rank 0s
  EXPECT_EQ(OrderByRank(files).status().message(),
            "r1 and r0 are both rank 0 (traces of two jobs, or one given twice?)");
  files[0].trace.rank.reset();
  EXPECT_NE(OrderByRank(files).status().message().find(
                "r1 does not say its rank (no distributedInfo) but the other traces do"),
            std::string::npos);
  files[0].trace.rank = 1;
  files[0].trace.world_size = 4;
  EXPECT_EQ(OrderByRank(files).status().message(),
            "r1 is rank 1 of a job of 4 ranks, but 2 traces were given (one per rank, of one "
            "job)");
}

TEST(ImportTrace, AnActionOutOfOrderNamesRankStepPositionAndBothTokens) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  std::vector<TraceFile> files = Parse(writer, 2);
  // Rank 1 ran 1B0 where the plan has 1F1 (swap the two ranges' tokens in step 2).
  TorchTrace& trace = files[1].trace;
  std::vector<TraceAction*> step2;
  for (TraceAction& a : trace.actions) {
    if (a.start >= trace.steps[1].start && IsCompute(a.action.kind)) step2.push_back(&a);
  }
  ASSERT_GE(step2.size(), 3u);
  std::swap(step2[1]->action, step2[2]->action);
  std::swap(step2[1]->token, step2[2]->token);
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.status().message(),
            "rank1.json (rank 1), step 2: compute action 1 is " + step2[1]->token + " (event " +
                std::to_string(step2[1]->event) + ") but the plan has " + step2[2]->token +
                " there (did the job run this plan?)");
}

TEST(ImportTrace, ARankThatStoppedMidStepIsNamed) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  std::vector<TraceFile> files = Parse(writer, 2);
  std::vector<TraceAction>& actions = files[0].trace.actions;
  actions.resize(actions.size() - 3);  // rank 0's last step lost its last three actions
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("rank0.json (rank 0) stopped in step 2 after "),
            std::string::npos)
      << imported.status().message();
}

// A step moves each tensor once: a second range of one transfer is not silently dropped.
TEST(ImportTrace, ATransferRangedTwiceInAStepIsNamed) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  std::vector<TraceFile> files = Parse(writer, 2);
  std::vector<TraceAction>& actions = files[0].trace.actions;
  const auto send = std::find_if(actions.begin(), actions.end(), [](const TraceAction& a) {
    return a.action.kind == ActionKind::kSendForward;
  });
  ASSERT_NE(send, actions.end());
  const std::string first = send->token + " (event " + std::to_string(send->event) + ")";
  TraceAction again = *send;
  again.event = 999;
  again.start += 0.5;
  again.end += 0.5;
  actions.insert(send + 1, again);
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, std::nullopt);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("rank0.json (rank 0), step 1: " + first + " and " +
                                             again.token + " (event 999) are the same transfer"),
            std::string::npos)
      << imported.status().message();
}

TEST(ImportTrace, StepsWithoutProfilerStepRangesFollowTheProgram) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.steps = 3;
  std::vector<TraceFile> files = Parse(writer, 2);
  for (TraceFile& file : files) file.trace.steps.clear();
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, files, 2);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->steps.size(), 3u);
  EXPECT_EQ(imported->steps[0].number, 0);  // numbered from 0 without ProfilerStep ranges
  EXPECT_EQ(imported->chosen, 2u);
  EXPECT_EQ(imported->steps[2].timeline.metrics.makespan, known.metrics.makespan);

  const StatusOr<TraceImport> missing = ImportTorchTraces(plan, files, 7);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "--step 7 is not a complete step of the traces (complete: 0, 1, 2)");
}

// Torch's own schedules post a receive when its sender's action is scheduled, long before the
// rank waits for it: the receive counts from the end of the rank's compute before the action
// that uses its data (where the simulator charges it), not from its post.
TEST(ImportTrace, AReceivePostedEarlyCountsFromThePreviousCompute) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  Timeline posted_early = known;
  size_t moved = 0;
  for (size_t i = 0; i < plan.programs[0].actions.size(); ++i) {
    if (plan.programs[0].actions[i].kind != ActionKind::kRecvBackward) continue;
    posted_early.ranks[0].actions[i].start = 0.0;
    ++moved;
  }
  ASSERT_EQ(moved, 4u);
  const TraceWriter early{plan, posted_early};
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, Parse(early, 2), std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const RankTimeline& rank0 = imported->steps.front().timeline.ranks[0];
  for (size_t i = 0; i < plan.programs[0].actions.size(); ++i) {
    if (plan.programs[0].actions[i].kind != ActionKind::kRecvBackward) continue;
    SCOPED_TRACE(Where(0, i, plan.programs[0].actions[i]));
    EXPECT_EQ(rank0.actions[i].start, known.ranks[0].actions[i].start);
  }
}

// Without --plan the job's executed programs are the plan, its transfers with their peers.
TEST(ImportTrace, ExecutedProgramsAreThePlanTheJobRan) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  const StatusOr<std::vector<RankProgram>> programs =
      ExecutedPrograms(Parse(writer, 2), plan.request.topology);
  ASSERT_TRUE(programs.ok()) << programs.status().message();
  EXPECT_EQ(*programs, plan.programs);
  const StatusOr<Plan> rebuilt = BuildPlanFromPrograms(plan.request, *programs);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().message();
  EXPECT_EQ(rebuilt->programs, plan.programs);
}

TEST(ImportTrace, AnExecutedTransferPastTheChainsEndIsNamed) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  Plan odd = plan;
  Timeline odd_known = known;
  Action send;
  send.kind = ActionKind::kSendForward;
  send.stage = StageId(1);  // the last stage: no stage after it to send to
  send.microbatch = MicrobatchId(0);
  odd.programs[1].actions.insert(odd.programs[1].actions.begin(), send);
  odd_known.ranks[1].actions.insert(odd_known.ranks[1].actions.begin(), ActionTiming{});
  const StatusOr<std::vector<RankProgram>> programs =
      ExecutedPrograms(Parse(TraceWriter{odd, odd_known}, 2), plan.request.topology);
  ASSERT_FALSE(programs.ok());
  EXPECT_NE(programs.status().message().find("rank1.json (rank 1): 1SEND_F0 (event "),
            std::string::npos)
      << programs.status().message();
  EXPECT_NE(programs.status().message().find("a stage the job does not have"), std::string::npos);

  // A plan whose transfers do not pair is refused as any imported plan is.
  std::vector<RankProgram> unpaired = plan.programs;
  unpaired[0].actions.erase(
      std::find_if(unpaired[0].actions.begin(), unpaired[0].actions.end(),
                   [](const Action& a) { return a.kind == ActionKind::kSendForward; }));
  EXPECT_FALSE(BuildPlanFromPrograms(plan.request, unpaired).ok());
}

TEST(ImportTrace, MemoryPerActionAddsUpToThePeak) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.memory = true;
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  for (const ImportedStep& step : imported->steps) {
    for (size_t r = 0; r < 2; ++r) {
      const RankTimeline& rank = step.timeline.ranks[r];
      const RankProgram& program = plan.programs[r];
      ASSERT_EQ(rank.memory_unit, MemoryUnit::kBytes);
      ASSERT_EQ(rank.action_memory.size(), program.actions.size());
      // 1f1b keeps P - r forwards in flight on rank r at most: 100 bytes each, and an F peaks
      // 50 above what it keeps.
      const double most_in_flight = 2.0 - static_cast<double>(r);
      EXPECT_EQ(rank.peak_memory, 1000.0 + 100.0 * most_in_flight + 50.0);
      EXPECT_EQ(rank.peak_activation_memory, 100.0 * most_in_flight + 50.0);
      // Compute actions run one after another: what one leaves, the next starts with.
      double held = 1000.0;
      for (size_t i = 0; i < program.actions.size(); ++i) {
        const ActionMemory& m = rank.action_memory[i];
        SCOPED_TRACE(Where(static_cast<int>(r), i, program.actions[i]));
        EXPECT_GE(m.peak, std::max(m.start, m.end));
        if (!IsCompute(program.actions[i].kind)) continue;
        EXPECT_EQ(m.start, held);
        held = m.end;
        if (program.actions[i].kind == ActionKind::kForward) {
          EXPECT_EQ(m.end - m.start, 100.0);
          EXPECT_EQ(m.peak, m.start + 150.0);
        } else {
          EXPECT_EQ(m.end - m.start, -100.0);
          EXPECT_EQ(m.peak, m.start + 20.0);
        }
      }
      EXPECT_EQ(held, 1000.0);  // every F's bytes freed by its B
    }
  }
}

// A block allocated in one step and freed in the next step's first F (torch's runtime holding
// a local stage's input until it is overwritten) is not that F's: every F keeps its own 100
// bytes; the step's last F keeps the held block too.
TEST(ImportTrace, AFreeOfTheLastStepsMemoryIsNotTheForwardsOwn) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.memory = true;
  writer.held_over = true;
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->steps.size(), 2u);
  for (const ImportedStep& step : imported->steps) {
    for (size_t r = 0; r < 2; ++r) {
      const RankProgram& program = plan.programs[r];
      const RankTimeline& rank = step.timeline.ranks[r];
      ASSERT_EQ(rank.action_memory.size(), program.actions.size());
      size_t last_forward = 0;
      for (size_t i = 0; i < program.actions.size(); ++i) {
        if (program.actions[i].kind == ActionKind::kForward) last_forward = i;
      }
      for (size_t i = 0; i < program.actions.size(); ++i) {
        if (program.actions[i].kind != ActionKind::kForward) continue;
        SCOPED_TRACE("step " + std::to_string(step.number) + ", " +
                     Where(static_cast<int>(r), i, program.actions[i]));
        const ActionMemory& m = rank.action_memory[i];
        EXPECT_EQ(m.end - m.start, i == last_forward ? 140.0 : 100.0);
        EXPECT_EQ(m.peak, m.start + 150.0);
      }
    }
  }
}

// A CPU trace counts what was allocated while it recorded; the job's own count of its live
// tensors at each step's end (1000 B counted there, 5000 B alive) adds the 4000 B it left out
// to every figure, so static memory and peaks are the process's whole.
TEST(ImportTrace, TheJobsCountOfItsLiveTensorsAddsWhatTheCpuTraceLeftOut) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.memory = true;
  const StatusOr<TraceImport> counted_only = ImportTorchTraces(plan, Parse(writer, 2), 1);
  ASSERT_TRUE(counted_only.ok()) << counted_only.status().message();
  ASSERT_EQ(counted_only->notes.size(), 2u);
  EXPECT_NE(counted_only->notes[0].find("parameters, optimizer state and data allocated before"),
            std::string::npos);
  EXPECT_NE(counted_only->notes[1].find("gradients the job frees between steps"),
            std::string::npos);
  writer.metadata.assign(2, R"("pipeplan_live_bytes": {"1": 5000, "2": 5000})");
  const StatusOr<TraceImport> whole = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_EQ(whole->notes.size(), 1u);  // the stages' parameters are still not told
  EXPECT_NE(whole->notes[0].find("pass the schedule"), std::string::npos);
  for (const ImportedStep& step : whole->steps) {
    for (size_t r = 0; r < 2; ++r) {
      const RankTimeline& rank = step.timeline.ranks[r];
      const double most_in_flight = 2.0 - static_cast<double>(r);
      EXPECT_EQ(rank.peak_memory, 5000.0 + 100.0 * most_in_flight + 50.0);
      EXPECT_EQ(rank.peak_activation_memory, 100.0 * most_in_flight + 50.0);
    }
  }
}

// pipeplan_profiler's "pipeplan_stages": a stage whose gradients the job frees between steps
// has them as gradient_bytes, which its first backward allocates; one that keeps them holds
// them as static bytes with its parameters.
TEST(ImportTrace, StageParametersAreStaticBytesOrGradientsAllocatedInTheStep) {
  KnownRun run;
  auto& [plan, known, writer] = run;
  writer.memory = true;
  writer.metadata = {
      R"("pipeplan_stages": {"0": {"parameter_bytes": 300, "gradients_held": false}})",
      R"("pipeplan_stages": {"1": {"parameter_bytes": 200, "gradients_held": true}})"};
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  for (const ImportedStep& step : imported->steps) {
    EXPECT_EQ(
        step.timeline.ranks[0].stage_static,
        (std::vector<StageStatic>{{.stage = StageId(0), .bytes = 300, .gradient_bytes = 300}}));
    EXPECT_EQ(step.timeline.ranks[1].stage_static,
              (std::vector<StageStatic>{{.stage = StageId(1), .bytes = 400}}));
  }
  writer.metadata[0] = R"("pipeplan_stages": {"1": {"parameter_bytes": 300}})";
  const StatusOr<TraceImport> misplaced = ImportTorchTraces(plan, Parse(writer, 2), std::nullopt);
  ASSERT_FALSE(misplaced.ok());
  EXPECT_EQ(misplaced.status().message(),
            "rank0.json (rank 0): pipeplan_stages names stage 1, which the plan does not place "
            "on this rank");
}

std::string ReadGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr) << path;
  if (file == nullptr) return "";
  std::string out;
  char buffer[1 << 16];
  int got = 0;
  while ((got = gzread(file, buffer, sizeof(buffer))) > 0) out.append(buffer, got);
  gzclose(file);
  return out;
}

// The H200 trace: one rank running interleaved-zb's P = 1, V = 4, M = 8 plan for three steps.
TEST(ImportTrace, ARealGpuTraceImportsWithDeviceTimes) {
  const std::string json =
      ReadGzip(std::string(PIPEPLAN_TEST_DATA_DIR) + "/h200_interleaved_zb_rank0.json.gz");
  StatusOr<TorchTrace> trace = ParseTorchTrace(json);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->rank, 0);
  EXPECT_EQ(trace->backend, "nccl");
  PlanRequest request = MakeRequest("interleaved-zb", 1, 8, 4);
  const Plan plan = BuildOrDie(request);
  const StatusOr<TraceImport> imported =
      ImportTorchTraces(plan, {{"h200.json.gz", *trace}}, std::nullopt);
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(imported->clock, OpClock::kProfilerDevice);
  ASSERT_EQ(imported->steps.size(), 3u);
  // 3F7's kernels, read from the file by hand: its gpu_user_annotation lasts 763.641,
  // 761.145 and 763.033 us in steps 1 to 3 (the kernels it launched start 2 ns before it).
  const std::vector<Action>& program = plan.programs[0].actions;
  size_t f7 = 0;
  while (ToString(program[f7]) != "3F7") ++f7;
  const double expected[] = {763.641, 761.145, 763.033};
  for (size_t s = 0; s < 3; ++s) {
    const RankTimeline& rank = imported->steps[s].timeline.ranks[0];
    EXPECT_NEAR(rank.actions[f7].end - rank.actions[f7].start, expected[s], 0.0025);
    EXPECT_EQ(rank.memory_unit, MemoryUnit::kBytes);
    EXPECT_GT(rank.peak_memory, rank.peak_activation_memory);
    EXPECT_GT(rank.peak_activation_memory, 0.0);
  }
  // I and W launch their kernels from autograd's thread, which gpu_user_annotation misses (3I7's
  // annotation lasts 0.93 us): each still lasts longer than a quarter of its stage's F. (Not
  // stage 0's I: the job's input needs no gradient, so torch's I there computes next to nothing
  // and its W the whole backward.)
  const RankTimeline& step1 = imported->steps[0].timeline.ranks[0];
  for (size_t i = 0; i < program.size(); ++i) {
    const Action& a = program[i];
    if (a.kind != ActionKind::kBackwardInput && a.kind != ActionKind::kBackwardWeight) continue;
    if (a.kind == ActionKind::kBackwardInput && a.stage.value == 0) continue;
    size_t f = 0;
    while (!(program[f].kind == ActionKind::kForward && program[f].stage == a.stage &&
             program[f].microbatch == a.microbatch)) {
      ++f;
    }
    const double forward = step1.actions[f].end - step1.actions[f].start;
    EXPECT_GT(step1.actions[i].end - step1.actions[i].start, forward / 4) << ToString(a);
  }
}

}  // namespace
}  // namespace pipeplan
