#include "pipeplan/measurement/import_trace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "pipeplan/simulation/clock_alignment.h"
#include "pipeplan/simulation/measured_timeline.h"
#include "pipeplan/simulation/timeline_metrics.h"
#include "trace_memory.h"

namespace pipeplan {
namespace {

// One rank's actions of one step, in the trace's order.
struct StepActions {
  int number = 0;
  std::vector<const TraceAction*> actions;
};

// Transfers are found by what they move: (kind, stage, microbatch).
using TransferKey = std::tuple<ActionKind, int, int>;
TransferKey KeyOf(const Action& a) { return {a.kind, a.stage.value, a.microbatch.value}; }

std::string RankName(const TraceFile& file, size_t rank) {
  return file.name + " (rank " + std::to_string(rank) + ")";
}

std::string EventOf(const TraceAction& a) {
  return a.token + " (event " + std::to_string(a.event) + ")";
}

size_t ComputeCount(const RankProgram& program) {
  return static_cast<size_t>(std::count_if(program.actions.begin(), program.actions.end(),
                                           [](const Action& a) { return IsCompute(a.kind); }));
}

// Steps by the trace's ProfilerStep ranges, or, without them, by the program's length: a step
// ends after the program's last compute action.
std::vector<StepActions> SplitSteps(const TorchTrace& trace, size_t computes_per_step) {
  std::vector<StepActions> steps;
  if (!trace.steps.empty()) {
    for (const TraceStep& step : trace.steps) {
      StepActions actions{step.number, {}};
      for (const TraceAction& a : trace.actions) {
        if (a.start >= step.start && a.start <= step.end) actions.actions.push_back(&a);
      }
      if (!actions.actions.empty()) steps.push_back(std::move(actions));
    }
    return steps;
  }
  // After a step's last compute action only its own trailing transfers follow: a transfer
  // it has already made, or any compute action, opens the next step.
  size_t computes = 0;
  std::set<TransferKey> transfers;
  for (const TraceAction& a : trace.actions) {
    const bool compute = IsCompute(a.action.kind);
    const bool done = computes == computes_per_step;
    if (steps.empty() || (done && (compute || transfers.contains(KeyOf(a.action))))) {
      steps.push_back({static_cast<int>(steps.size()), {}});
      computes = 0;
      transfers.clear();
    }
    if (compute) {
      ++computes;
    } else {
      transfers.insert(KeyOf(a.action));
    }
    steps.back().actions.push_back(&a);
  }
  return steps;
}

// A rank's step, matched to its program: for each program action, the trace action that ran it.
struct MatchedStep {
  std::vector<const TraceAction*> by_index;
};

Status ComputeMismatch(const std::string& where, int step, size_t position,
                       const TraceAction& found, const Action& planned) {
  return InvalidArgument(where + ", step " + std::to_string(step) + ": compute action " +
                         std::to_string(position) + " is " + EventOf(found) + " but the plan has " +
                         ToString(planned) + " there (did the job run this plan?)");
}

StatusOr<MatchedStep> MatchStep(const RankProgram& program, const StepActions& step,
                                const std::string& where, bool last_step) {
  std::vector<const TraceAction*> computes;
  std::map<TransferKey, const TraceAction*> transfers;
  for (const TraceAction* a : step.actions) {
    if (IsCompute(a->action.kind)) {
      computes.push_back(a);
    } else if (const auto [it, added] = transfers.emplace(KeyOf(a->action), a); !added) {
      return InvalidArgument(where + ", step " + std::to_string(step.number) + ": " +
                             EventOf(*it->second) + " and " + EventOf(*a) +
                             " are the same transfer (a step moves each tensor once)");
    }
  }
  MatchedStep matched;
  matched.by_index.resize(program.actions.size(), nullptr);
  size_t next = 0;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& planned = program.actions[i];
    if (IsCompute(planned.kind)) {
      if (next == computes.size()) {
        const std::string last = computes.empty() ? "none" : EventOf(*computes.back());
        return InvalidArgument(
            where + (last_step ? " stopped in step " : ", step ") + std::to_string(step.number) +
            " after " + std::to_string(next) + " of its " + std::to_string(ComputeCount(program)) +
            " compute actions (last: " + last + "; next in the plan: " + ToString(planned) + ")");
      }
      if (!(computes[next]->action == planned)) {
        return ComputeMismatch(where, step.number, next, *computes[next], planned);
      }
      matched.by_index[i] = computes[next++];
    } else if (IsComm(planned.kind)) {
      const auto found = transfers.find(KeyOf(planned));
      if (found == transfers.end()) {
        return InvalidArgument(where + ", step " + std::to_string(step.number) + ": the plan's " +
                               ToString(planned) + " (action " + std::to_string(i) +
                               ") has no PP:" + ToString(planned) + " range in the trace");
      }
      matched.by_index[i] = found->second;
    } else {
      return InvalidArgument(
          "the plan has post-validation (" + ToString(planned) +
          "), which torch's runtime does not run: import needs the plan the job ran");
    }
  }
  if (next < computes.size()) {
    return InvalidArgument(where + ", step " + std::to_string(step.number) + ": extra action " +
                           EventOf(*computes[next]) + " after the plan's " + std::to_string(next) +
                           " compute actions");
  }
  return matched;
}

// For each receive (by what it moves), the index of the compute action that first uses its
// data: F of its (stage, mb) for RECV_F, B or I for RECV_B, alone or as an overlap cell's half.
std::map<TransferKey, size_t> Consumers(const RankProgram& program) {
  std::map<TransferKey, size_t> consumers;
  for (size_t j = 0; j < program.actions.size(); ++j) {
    const Action& compute = program.actions[j];
    if (!IsCompute(compute.kind)) continue;
    const auto note = [&](const Action& leaf) {
      if (leaf.kind == ActionKind::kForward) {
        consumers.emplace(
            TransferKey{ActionKind::kRecvForward, leaf.stage.value, leaf.microbatch.value}, j);
      } else if (leaf.kind == ActionKind::kBackward || leaf.kind == ActionKind::kBackwardInput) {
        consumers.emplace(
            TransferKey{ActionKind::kRecvBackward, leaf.stage.value, leaf.microbatch.value}, j);
      }
    };
    if (compute.sub_actions.empty()) note(compute);
    for (const Action& leaf : compute.sub_actions) note(leaf);
  }
  return consumers;
}

struct Span {
  double start;
  double end;
};

// A compute action that uses a received input waits for it first, inside its own range (on
// the host; on a GPU the device span starts with its first kernel anyway).
Span HostOrDevice(const TraceAction& a, bool waits) {
  if (a.device_start.has_value()) return {*a.device_start, *a.device_end};
  return {waits ? a.work_start : a.start, a.end};
}

// One rank's timings of one step, in microseconds on the traces' common base (`offset` moves
// this rank's trace onto it), with its memory in bytes.
RankTimeline RankTiming(const RankProgram& program, const MatchedStep& matched,
                        const RankMemory& memory, double offset, OpClock clock) {
  RankTimeline rank;
  rank.rank = program.rank;
  rank.clock = clock;
  const size_t n = program.actions.size();
  const std::map<TransferKey, size_t> consumers = Consumers(program);
  std::vector<bool> waiting(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (const auto c = consumers.find(KeyOf(program.actions[i])); c != consumers.end()) {
      waiting[c->second] = true;
    }
  }
  std::vector<Span> spans(n);
  for (size_t i = 0; i < n; ++i) spans[i] = HostOrDevice(*matched.by_index[i], waiting[i]);
  for (size_t i = 0; i < n; ++i) {
    const Action& planned = program.actions[i];
    const auto consumer = consumers.find(KeyOf(planned));
    if (consumer == consumers.end() || matched.by_index[i]->device_start.has_value()) continue;
    // Torch posts a receive and waits for it inside the action that needs the data. An F&B
    // cell runs its halves one after the other in one range: a gradient for its backward
    // half is known to have landed only by the cell's end.
    const TraceAction& user = *matched.by_index[consumer->second];
    const bool second_half = planned.kind == ActionKind::kRecvBackward &&
                             program.actions[consumer->second].kind == ActionKind::kOverlapFB;
    spans[i].end = std::max(spans[i].end, second_half ? user.end : user.work_start);
    // Posted early (torch's own schedules post a receive when its sender's action is
    // scheduled), it is waited for only once the rank's previous compute is done: the
    // receive counts from there, as the simulator charges it.
    for (size_t j = consumer->second; j-- > 0;) {
      if (!IsCompute(program.actions[j].kind)) continue;
      spans[i].start = std::clamp(spans[j].end, spans[i].start, spans[i].end);
      break;
    }
  }
  rank.actions.resize(n);
  for (size_t i = 0; i < n; ++i) {
    rank.actions[i] = {.start = spans[i].start + offset,
                       .end = spans[i].end + offset,
                       .thread = IsCompute(program.actions[i].kind) ? kComputeThread : kCommThread};
  }
  if (memory.events.empty()) return rank;
  rank.memory_unit = MemoryUnit::kBytes;
  rank.action_memory.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const TraceAction& traced = *matched.by_index[i];
    // What the rank allocates between an F and its next action is the F's: torch's
    // single-stage schedules compute the loss after the F range their stage marks, and what
    // it keeps for the backward is the microbatch's as much as F's own.
    const bool forward = program.actions[i].kind == ActionKind::kForward;
    const double until =
        forward && i + 1 < n ? std::max(traced.end, matched.by_index[i + 1]->start) : traced.end;
    rank.action_memory[i] = MemoryOf(memory, traced.start, until);
  }
  // The curve on the actions' own clock (a GPU's kernels run well after the host allocated
  // for them).
  SummarizeMeasuredMemory(program, rank);
  return rank;
}

// Moves a step's times so that its first action starts at 0 (on a GPU, the first kernel: the
// host runs ahead of it by as much as its launch queue holds).
void StartAtZero(std::vector<RankTimeline>& ranks) {
  double origin = std::numeric_limits<double>::infinity();
  for (const RankTimeline& rank : ranks) {
    for (const ActionTiming& t : rank.actions) origin = std::min(origin, t.start);
  }
  for (RankTimeline& rank : ranks) {
    for (ActionTiming& t : rank.actions) {
      t.start -= origin;
      t.end -= origin;
    }
    for (MemorySample& m : rank.memory) m.time -= origin;
  }
}

// What the job told of its stages' parameters (TraceStageParameters): each stage's static
// bytes, its parameters and, where allocated from step to step, their gradients; gradients
// freed between steps are the stage's gradient_bytes, which its first backward allocates.
StatusOr<std::vector<StageStatic>> StageParameters(const TraceFile& file, size_t r,
                                                   const StageMap& stages) {
  std::vector<StageStatic> out;
  for (const TraceStageParameters& stage : file.trace.stage_parameters) {
    if (stage.stage >= stages.num_stages() ||
        stages.RankOf(StageId(stage.stage)).value != static_cast<int>(r)) {
      return InvalidArgument(RankName(file, r) + ": pipeplan_stages names stage " +
                             std::to_string(stage.stage) +
                             ", which the plan does not place on this rank");
    }
    // Gradients are as large as the parameters they are of.
    const double gradients = stage.parameter_bytes;
    out.push_back({.stage = StageId(stage.stage),
                   .bytes = stage.parameter_bytes + (stage.gradients_held ? gradients : 0.0),
                   .gradient_bytes = stage.gradients_held ? 0.0 : gradients});
  }
  return out;
}

bool HasDeviceSpans(const std::vector<TraceFile>& ranks) {
  for (const TraceFile& file : ranks) {
    for (const TraceAction& a : file.trace.actions) {
      if (a.device_start.has_value()) return true;
    }
  }
  return false;
}

// A rank's actions of its first step: its first ProfilerStep range, or without those up to
// where its first action comes round again.
std::vector<const TraceAction*> FirstStep(const TorchTrace& trace) {
  std::vector<const TraceAction*> step;
  const double step_end =
      trace.steps.empty() ? std::numeric_limits<double>::infinity() : trace.steps.front().end;
  for (const TraceAction& a : trace.actions) {
    if (!trace.steps.empty() && a.start < trace.steps.front().start) continue;
    if (a.start > step_end) break;
    if (!step.empty() && a.action == step.front()->action) break;
    step.push_back(&a);
  }
  return step;
}

// The stage on the other side of a transfer: the next one for activations sent or gradients
// received, the previous one otherwise; nullopt past either end of its chain.
std::optional<StageId> OtherSide(const StageMap& stages, const Action& transfer) {
  const bool towards_next =
      transfer.kind == ActionKind::kSendForward || transfer.kind == ActionKind::kRecvBackward;
  const StageId stage = transfer.stage;
  if (stage.value < 0 || stage.value >= stages.num_stages()) return std::nullopt;
  if (towards_next ? stages.IsLast(stage) : stages.IsFirst(stage)) return std::nullopt;
  return StageId{stage.value + (towards_next ? 1 : -1)};
}

// Where each rank's trace starts on the traces' common clock, in microseconds after the
// earliest: its base (nanoseconds) plus its first event's time. Bases past what 64-bit
// nanoseconds hold, or ranks further apart than that, are not a job's clocks.
StatusOr<std::vector<double>> ClockOffsets(const std::vector<TraceFile>& ranks) {
  std::vector<int64_t> starts;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const TorchTrace& t = ranks[r].trace;
    int64_t origin = 0;
    int64_t start = 0;
    if (__builtin_mul_overflow(t.origin_microseconds, 1000, &origin) ||
        __builtin_add_overflow(t.base_nanoseconds, origin, &start)) {
      return InvalidArgument(RankName(ranks[r], r) + ": baseTimeNanoseconds " +
                             std::to_string(t.base_nanoseconds) + " and its first event at " +
                             std::to_string(t.origin_microseconds) +
                             " us are past what 64-bit nanoseconds hold");
    }
    starts.push_back(start);
  }
  const int64_t base = *std::min_element(starts.begin(), starts.end());
  std::vector<double> offsets;
  for (size_t r = 0; r < ranks.size(); ++r) {
    int64_t apart = 0;
    if (__builtin_sub_overflow(starts[r], base, &apart)) {
      return InvalidArgument(RankName(ranks[r], r) + " starts further from the other traces " +
                             "than 64-bit nanoseconds hold: traces of one job?");
    }
    offsets.push_back(static_cast<double>(apart) / 1e3);
  }
  return offsets;
}

}  // namespace

StatusOr<std::vector<TraceFile>> OrderByRank(std::vector<TraceFile> files) {
  const int count = static_cast<int>(files.size());
  size_t with_rank = 0;
  for (const TraceFile& file : files) {
    if (file.trace.rank.has_value()) ++with_rank;
    if (file.trace.world_size.has_value() && *file.trace.world_size != count) {
      return InvalidArgument(
          file.name + " is rank " + std::to_string(file.trace.rank.value_or(-1)) + " of a job of " +
          std::to_string(*file.trace.world_size) + " ranks, but " + std::to_string(count) +
          " traces were given (one per rank, of one job)");
    }
  }
  if (with_rank == 0) return files;
  if (with_rank != files.size()) {
    for (const TraceFile& file : files) {
      if (!file.trace.rank.has_value()) {
        return InvalidArgument(file.name +
                               " does not say its rank (no distributedInfo) but the other "
                               "traces do: the order of the files cannot tell ranks apart");
      }
    }
  }
  std::vector<std::optional<TraceFile>> by_rank(files.size());
  for (TraceFile& file : files) {
    const int rank = *file.trace.rank;
    if (rank < 0 || rank >= count) {
      return InvalidArgument(file.name + " is rank " + std::to_string(rank) + " but only " +
                             std::to_string(count) + " traces were given");
    }
    if (by_rank[rank].has_value()) {
      return InvalidArgument(by_rank[rank]->name + " and " + file.name + " are both rank " +
                             std::to_string(rank) + " (traces of two jobs, or one given twice?)");
    }
    by_rank[rank] = std::move(file);
  }
  std::vector<TraceFile> ordered;
  ordered.reserve(by_rank.size());
  for (auto& file : by_rank) ordered.push_back(std::move(*file));
  return ordered;
}

std::vector<std::vector<Action>> ExecutedComputeOrder(const std::vector<TraceFile>& ranks) {
  std::vector<std::vector<Action>> order;
  for (const TraceFile& file : ranks) {
    std::vector<Action>& mine = order.emplace_back();
    for (const TraceAction* a : FirstStep(file.trace)) {
      if (IsCompute(a->action.kind)) mine.push_back(a->action);
    }
  }
  return order;
}

StatusOr<std::vector<RankProgram>> ExecutedPrograms(const std::vector<TraceFile>& ranks,
                                                    const Topology& topology) {
  const StageMap stages(topology);
  std::vector<RankProgram> programs;
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankProgram& program = programs.emplace_back();
    program.rank = RankId{static_cast<int>(r)};
    for (const TraceAction* a : FirstStep(ranks[r].trace)) {
      Action action = a->action;
      if (IsComm(action.kind)) {
        const std::optional<StageId> other = OtherSide(stages, action);
        if (!other.has_value()) {
          return InvalidArgument(RankName(ranks[r], r) + ": " + EventOf(*a) +
                                 " moves data to or from a stage the job does not have");
        }
        action.peer = stages.RankOf(*other);
        if (action.peer == program.rank) {
          return InvalidArgument(RankName(ranks[r], r) + ": " + EventOf(*a) +
                                 " is a transfer between two stages of this rank");
        }
      }
      program.actions.push_back(std::move(action));
    }
  }
  return programs;
}

StatusOr<TraceImport> ImportTorchTraces(const Plan& plan, const std::vector<TraceFile>& ranks,
                                        std::optional<int> step) {
  if (ranks.size() != plan.programs.size()) {
    return InvalidArgument("got " + std::to_string(ranks.size()) + " traces for a plan of " +
                           std::to_string(plan.programs.size()) + " ranks (one trace per rank)");
  }
  TraceImport result;
  const bool device = HasDeviceSpans(ranks);
  result.clock = device ? OpClock::kProfilerDevice : OpClock::kProfilerHost;
  // Per rank: its steps matched to its program.
  std::vector<std::map<int, MatchedStep>> matched(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankProgram& program = plan.programs[r];
    const std::vector<StepActions> steps = SplitSteps(ranks[r].trace, ComputeCount(program));
    for (size_t s = 0; s < steps.size(); ++s) {
      PIPEPLAN_ASSIGN_OR_RETURN(MatchedStep one, MatchStep(program, steps[s], RankName(ranks[r], r),
                                                           s + 1 == steps.size()));
      matched[r].emplace(steps[s].number, std::move(one));
    }
  }
  if (!device && std::any_of(ranks.begin(), ranks.end(), [](const TraceFile& f) {
        return !f.trace.memory.empty() && f.trace.live_bytes.empty();
      })) {
    result.notes.emplace_back(
        "a CPU trace counts only the memory allocated while the profiler recorded: parameters, "
        "optimizer state and data allocated before are left out of static memory and peaks "
        "(python/pipeplan_profiler.py's profile_steps records them)");
  }
  if (std::any_of(ranks.begin(), ranks.end(), [](const TraceFile& f) {
        return !f.trace.memory.empty() && f.trace.stage_parameters.empty();
      })) {
    result.notes.emplace_back(
        "the traces do not say what each stage's parameters hold: gradients the job frees "
        "between steps (zero_grad(set_to_none=True)) are not counted where its backward "
        "allocates them (pass the schedule: profile_steps(..., schedule=schedule))");
  }
  // Ranks' trace clocks differ by their base and origin; the alignment corrects what is left.
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<double> offsets, ClockOffsets(ranks));
  for (const auto& [number, unused] : matched.front()) {
    bool everywhere = true;
    for (size_t r = 0; r < ranks.size(); ++r)
      everywhere = everywhere && matched[r].contains(number);
    if (!everywhere) {
      result.notes.push_back("step " + std::to_string(number) +
                             " is not in every rank's trace: left out");
      continue;
    }
    std::vector<RankTimeline> timings;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const RankMemory memory = MemoryOfStep(ranks[r].trace, device, number);
      timings.push_back(
          RankTiming(plan.programs[r], matched[r].at(number), memory, offsets[r], result.clock));
      if (!memory.events.empty()) {
        PIPEPLAN_ASSIGN_OR_RETURN(timings.back().stage_static,
                                  StageParameters(ranks[r], r, StageMap(plan.request.topology)));
      }
    }
    // Align first: a rank whose trace clock is ahead (Kineto rounds each base to a whole
    // second) moves the others forward, and only then is the step's start known.
    ImportedStep imported;
    imported.number = number;
    imported.clock_shifts = AlignRankClocks(plan, timings);
    StartAtZero(timings);
    PIPEPLAN_ASSIGN_OR_RETURN(imported.timeline,
                              AssembleMeasuredTimeline(plan, std::move(timings)));
    result.steps.push_back(std::move(imported));
  }
  if (result.steps.empty()) {
    return InvalidArgument("no step is complete in every rank's trace");
  }
  if (step.has_value()) {
    const auto it = std::find_if(result.steps.begin(), result.steps.end(),
                                 [&](const ImportedStep& s) { return s.number == *step; });
    if (it == result.steps.end()) {
      std::string numbers;
      for (const ImportedStep& s : result.steps) {
        numbers += (numbers.empty() ? "" : ", ") + std::to_string(s.number);
      }
      return InvalidArgument("--step " + std::to_string(*step) +
                             " is not a complete step of the traces (complete: " + numbers + ")");
    }
    result.chosen = static_cast<size_t>(it - result.steps.begin());
    return result;
  }
  std::vector<Timeline> timelines;
  for (const ImportedStep& s : result.steps) timelines.push_back(s.timeline);
  const Timeline& median = MedianStep(timelines);
  result.chosen = static_cast<size_t>(&median - timelines.data());
  return result;
}

}  // namespace pipeplan
