#include "pipeplan/simulation/simulator.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/passes/list_schedule.h"
#include "pipeplan/passes/scheduled_passes.h"
#include "pipeplan/simulation/memory_tracker.h"
#include "pipeplan/simulation/timeline_metrics.h"

namespace pipeplan {
namespace {

// End times of producers, for timing the transfers.
struct ProducerEnds {
  StageMbTable<double> forward;
  StageMbTable<double> input_grad;
};

ProducerEnds CollectProducerEnds(const std::vector<RankProgram>& programs,
                                 const ListScheduleResult& schedule, const Topology& topology) {
  ProducerEnds ends{StageMbTable<double>(topology.num_stages(), topology.microbatches, 0.0),
                    StageMbTable<double>(topology.num_stages(), topology.microbatches, 0.0)};
  for (size_t r = 0; r < programs.size(); ++r) {
    size_t compute = 0;
    for (const Action& action : programs[r].actions) {
      if (!IsCompute(action.kind)) continue;
      const double end = schedule.At(static_cast<int>(r), compute++).end;
      for (const Action* part : ComputeParts(action)) {
        if (part->kind == ActionKind::kForward)
          ends.forward.At(part->stage, part->microbatch) = end;
        if (part->kind == ActionKind::kBackward || part->kind == ActionKind::kBackwardInput) {
          ends.input_grad.At(part->stage, part->microbatch) = end;
        }
      }
    }
  }
  return ends;
}

// Each boundary's transfer time and receive overhead (CostModel::TransferTime and
// ReceiveOverhead), looked up once: every comm action reads them.
class BoundaryTimes {
 public:
  BoundaryTimes(const CostModel& costs, int num_stages) {
    for (int s = 0; s + 1 < num_stages; ++s) {
      const StageId from(s);
      const StageId to(s + 1);
      transfer_.push_back(costs.TransferTime(from, to));
      overhead_.push_back(costs.ReceiveOverhead(from, to));
    }
  }
  // Between `a` and its neighbour `b` (CheckIndices made sure both exist).
  double Transfer(StageId a, StageId b) const { return transfer_[Index(a, b)]; }
  double Overhead(StageId a, StageId b) const { return overhead_[Index(a, b)]; }

 private:
  static size_t Index(StageId a, StageId b) {
    return static_cast<size_t>(std::min(a.value, b.value));
  }

  std::vector<double> transfer_;
  std::vector<double> overhead_;
};

// A SEND runs from its producer's end until the data lands; a RECV from the moment the rank
// reaches it until the data lands, and for at least the boundary's receive overhead.
ActionTiming CommTiming(const Action& action, double rank_time, const ProducerEnds& ends,
                        const BoundaryTimes& boundaries) {
  const StageId s = action.stage;
  const MicrobatchId m = action.microbatch;
  switch (action.kind) {
    case ActionKind::kSendForward: {
      const double start = ends.forward.At(s, m);
      return {start, start + boundaries.Transfer(s, StageId(s.value + 1)), kCommThread};
    }
    case ActionKind::kSendBackward: {
      const double start = ends.input_grad.At(s, m);
      return {start, start + boundaries.Transfer(s, StageId(s.value - 1)), kCommThread};
    }
    case ActionKind::kRecvForward: {
      const StageId from(s.value - 1);
      const double arrival = ends.forward.At(from, m) + boundaries.Transfer(from, s);
      return {rank_time, std::max(rank_time + boundaries.Overhead(from, s), arrival), kCommThread};
    }
    case ActionKind::kRecvBackward: {
      const StageId from(s.value + 1);
      const double arrival = ends.input_grad.At(from, m) + boundaries.Transfer(from, s);
      return {rank_time, std::max(rank_time + boundaries.Overhead(from, s), arrival), kCommThread};
    }
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return {rank_time, rank_time, kCommThread};
    case ActionKind::kPostValidation:
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
      return {rank_time, rank_time};
  }
  return {rank_time, rank_time};
}

// When each stage's input gradient, sent to another rank, landed there (the end of the RECV_B
// that took it), by the sending stage; never, where nothing took it.
StageMbTable<double> CollectGradientLandings(const std::vector<RankProgram>& programs,
                                             const std::vector<RankTimeline>& ranks,
                                             const Topology& topology) {
  StageMbTable<double> landed(topology.num_stages(), topology.microbatches,
                              std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < programs.size(); ++r) {
    const std::vector<Action>& actions = programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const StageId sender(a.stage.value + 1);
      if (a.kind != ActionKind::kRecvBackward || !landed.Contains(sender, a.microbatch)) continue;
      landed.At(sender, a.microbatch) = ranks[r].actions[i].end;
    }
  }
  return landed;
}

RankTimeline TimeRank(int rank, const RankProgram& program, const ListScheduleResult& schedule,
                      const ProducerEnds& ends, const BoundaryTimes& boundaries) {
  RankTimeline out;
  out.rank = RankId(rank);
  out.actions.resize(program.actions.size());
  double rank_time = 0.0;
  size_t compute = 0;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& action = program.actions[i];
    if (!IsCompute(action.kind)) {
      out.actions[i] = CommTiming(action, rank_time, ends, boundaries);
      continue;
    }
    const ScheduledCompute& t = schedule.At(rank, compute);
    out.actions[i] = {t.start, t.end};
    if (compute == 0) out.first_start = t.start;
    out.last_end = t.end;
    out.busy += t.end - t.start;
    rank_time = t.end;
    ++compute;
  }
  return out;
}

// A receive's message, allocated where the rank posts the receive: after the compute before
// it, which may be well before its consumer (the comm order that no rendezvous can deadlock
// puts some receives early). Its consumer counts it from its own start.
struct PostedReceive {
  ActionKind kind;  // RECV_F or RECV_B
  StageId stage;
  MicrobatchId microbatch;
  double bytes;

  bool ConsumedBy(const Action& part) const {
    if (part.stage != stage || part.microbatch != microbatch) return false;
    if (kind == ActionKind::kRecvForward) return part.kind == ActionKind::kForward;
    return part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput;
  }
};

// The rank's memory over the step: what its compute holds (RankMemoryTracker), the messages
// of receives posted ahead of their consumers, less each gradient it sent from the first op
// that starts once the gradient landed, where the runtime frees a buffer whose send completed
// (OpExecutor::SendCompleted); `holds_to_step_end` (torch's runtime, which clears its stages'
// state when the step ends): never within the step.
void TrackMemory(const RankProgram& program, const MemoryChangeTable& changes,
                 const StageMbTable<double>& gradient_landed, double static_memory,
                 bool holds_to_step_end, RankTimeline& out) {
  out.memory.reserve(3 * program.actions.size() + 1);
  RankMemoryTracker tracker(changes);
  out.memory.push_back({0.0, static_memory});
  struct Sent {
    double landed;
    double bytes;
  };
  std::vector<Sent> sent;
  std::vector<PostedReceive> posted;
  for (size_t i = 0; i < program.actions.size(); ++i) {
    const Action& action = program.actions[i];
    const ActionTiming& t = out.actions[i];
    if (action.kind == ActionKind::kSendBackward && !holds_to_step_end &&
        gradient_landed.Contains(action.stage, action.microbatch)) {
      sent.push_back(
          {gradient_landed.At(action.stage, action.microbatch), changes.Retained(action.stage)});
    }
    if (action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward) {
      const double bytes = changes.ReceivedMessage(action.kind, action.stage);
      if (bytes > 0) {
        posted.push_back({action.kind, action.stage, action.microbatch, bytes});
        tracker.Hold(bytes);
        out.memory.push_back({t.start, static_memory + tracker.held()});
      }
    }
    if (!IsCompute(action.kind)) continue;
    std::erase_if(sent, [&](const Sent& s) {
      if (s.landed > t.start) return false;
      tracker.Release(s.bytes);
      return true;
    });
    for (const Action* part : ComputeParts(action)) {
      std::erase_if(posted, [&](const PostedReceive& p) {
        if (!p.ConsumedBy(*part)) return false;
        tracker.Release(p.bytes);
        return true;
      });
    }
    tracker.Start(action);
    out.memory.push_back({t.start, static_memory + tracker.held()});
    if (tracker.top() > tracker.held()) {
      out.memory.push_back({(t.start + t.end) / 2, static_memory + tracker.top()});
    }
    tracker.End(action);
    out.memory.push_back({t.end, static_memory + tracker.held()});
  }
  out.peak_activation_memory = tracker.peak();
  out.peak_memory = static_memory + tracker.peak();
  out.memory_unit = changes.memory().unit;
}

Status CheckSimulatable(const Plan& plan, const CostModel& costs, const MemoryModel& memory) {
  const Topology& topology = plan.request.topology;
  PIPEPLAN_RETURN_IF_ERROR(ValidateTopology(topology));
  PIPEPLAN_RETURN_IF_ERROR(ValidateCostModel(costs, topology.num_stages()));
  PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(memory, topology.num_stages()));
  PIPEPLAN_RETURN_IF_ERROR(ValidateStaticByRank(memory, topology.ranks));
  if (static_cast<int>(plan.programs.size()) != topology.ranks) {
    return InvalidArgument("the plan has " + std::to_string(plan.programs.size()) +
                           " rank programs but the topology has " + std::to_string(topology.ranks) +
                           " ranks");
  }
  return Status::Ok();
}

Status OutOfRange(int rank, size_t index, const Action& action, const std::string& what) {
  return InvalidArgument(Where(rank, index, action) + ": " + what +
                         " (run the validator: pipeplan "
                         "validates plans before simulating them)");
}

// Simulating trusts the plan's meaning (ValidatePlan checks it) but never its indices: every
// stage, microbatch and neighbour the simulator looks up must exist.
Status CheckIndices(const Plan& plan) {
  const StageMap stages(plan.request.topology);
  auto stage_ok = [&](StageId s) { return s.value >= 0 && s.value < stages.num_stages(); };
  auto mb_ok = [&](const Action& a) {
    return a.microbatch.value >= 0 && a.microbatch.value < stages.MicrobatchesOf(a.stage);
  };
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const int rank = static_cast<int>(r);
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (IsCompute(a.kind)) {
        for (const Action* part : ComputeParts(a)) {
          if (!stage_ok(part->stage) || !mb_ok(*part))
            return OutOfRange(rank, i, a, "stage or microbatch out of range");
        }
        continue;
      }
      switch (a.kind) {
        case ActionKind::kSendForward:
        case ActionKind::kRecvBackward:
          if (!stage_ok(a.stage) || !mb_ok(a) || stages.IsLast(a.stage)) {
            return OutOfRange(rank, i, a, "no next stage to exchange with");
          }
          break;
        case ActionKind::kRecvForward:
        case ActionKind::kSendBackward:
          if (!stage_ok(a.stage) || !mb_ok(a) || stages.IsFirst(a.stage)) {
            return OutOfRange(rank, i, a, "no previous stage to exchange with");
          }
          break;
        case ActionKind::kForward:
        case ActionKind::kBackward:
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight:
        case ActionKind::kOverlapFB:
        case ActionKind::kPostValidation:
        case ActionKind::kSendPostValidation:
        case ActionKind::kRecvPostValidation:
          break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace

double LowerBound(const Plan& plan, const CostModel& costs) {
  const Topology& topology = plan.request.topology;
  const StageMap stages(topology);
  double max_work = 0.0;
  std::vector<bool> split(topology.num_stages(), false);  // stage uses I + W
  for (const RankProgram& program : plan.programs) {
    double work = 0.0;
    for (const Action& action : program.actions) {
      if (!IsCompute(action.kind)) continue;
      work += costs.ComputeTime(action);
      for (const Action* part : ComputeParts(action)) {
        if (part->kind == ActionKind::kBackwardInput && part->stage.value < topology.num_stages()) {
          split[part->stage.value] = true;
        }
      }
    }
    max_work = std::max(max_work, work);
  }
  // One microbatch down each chain and back up it, then the first stage's W if split.
  double path = 0.0;
  double chain = 0.0;
  for (int s = 0; s < topology.num_stages(); ++s) {
    const StageId stage(s);
    const StageCosts& c = costs.Stage(stage);
    chain += c.forward + (split[s] ? c.backward_input : c.backward);
    if (stages.IsFirst(stage) && split[s]) chain += c.backward_weight;
    if (!stages.IsLast(stage) && stages.RankOf(stage) != stages.RankOf(StageId(s + 1))) {
      chain += 2 * costs.TransferTime(stage, StageId(s + 1));
    }
    if (stages.IsLast(stage)) {
      path = std::max(path, chain);
      chain = 0.0;
    }
  }
  return std::max(max_work, path);
}

namespace {
thread_local SimulationCount* active_count = nullptr;

// A plan's lower bound under `costs`: a solver's proven bound holds for the costs it solved
// with, the plan's own.
double LowerBoundWithProof(const Plan& plan, const CostModel& costs) {
  double lower_bound = LowerBound(plan, costs);
  if (costs == plan.request.costs) {
    lower_bound = std::max(lower_bound, plan.provenance.proven_bound);
  }
  return lower_bound;
}
}  // namespace

SimulationCount::SimulationCount() : outer_(active_count) { active_count = this; }

SimulationCount::~SimulationCount() { active_count = outer_; }

// Where SimulateScheduled reports to the active count.
class SimulationCounted {
 public:
  static void Add() {
    if (active_count != nullptr) ++active_count->value_;
  }
};

void RefreshLowerBound(const Plan& plan, Timeline& timeline) {
  timeline.metrics = ComputeMetrics(timeline.ranks, LowerBoundWithProof(plan, plan.request.costs));
}

StatusOr<Timeline> Simulate(const Plan& plan) {
  return Simulate(plan, plan.request.costs, plan.request.memory);
}

StatusOr<Timeline> Simulate(const Plan& plan, const CostModel& costs, const MemoryModel& memory) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSimulatable(plan, costs, memory));
  PIPEPLAN_RETURN_IF_ERROR(CheckIndices(plan));
  const StageMap stages(plan.request.topology);
  const ProgramComputeView view = ExtractCompute(plan.programs);
  PIPEPLAN_ASSIGN_OR_RETURN(const ListScheduleResult schedule,
                            RunListSchedule(view.order, stages, costs));
  return SimulateScheduled(plan, costs, memory, schedule);
}

Timeline SimulateScheduled(const Plan& plan, const CostModel& costs, const MemoryModel& memory,
                           const ListScheduleResult& schedule) {
  const Topology& topology = plan.request.topology;
  const ProducerEnds ends = CollectProducerEnds(plan.programs, schedule, topology);
  const BoundaryTimes boundaries(costs, topology.num_stages());
  Timeline timeline;
  timeline.source = TimelineSource::kSimulated;
  timeline.ranks.reserve(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    timeline.ranks.push_back(
        TimeRank(static_cast<int>(r), plan.programs[r], schedule, ends, boundaries));
  }
  const MemoryChangeTable changes(memory, topology);
  const StageMbTable<double> landed =
      CollectGradientLandings(plan.programs, timeline.ranks, topology);
  const StageMap map(topology);
  const bool holds_to_step_end = IsTorchScheduleRuntime(plan.request.runtime);
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    TrackMemory(plan.programs[r], changes, landed,
                memory.StaticOf(RankId(static_cast<int>(r)), map), holds_to_step_end,
                timeline.ranks[r]);
  }
  timeline.metrics = ComputeMetrics(timeline.ranks, LowerBoundWithProof(plan, costs));
  SimulationCounted::Add();
  return timeline;
}

}  // namespace pipeplan
