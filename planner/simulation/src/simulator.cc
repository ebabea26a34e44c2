#include "pipeplan/simulation/simulator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/passes/list_schedule.h"
#include "pipeplan/passes/scheduled_passes.h"
#include "pipeplan/simulation/timeline_metrics.h"
#include "plan_checks.h"
#include "rank_memory.h"

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
  TrackRankMemory(plan.programs, memory, topology,
                  /*holds_to_step_end=*/IsTorchScheduleRuntime(plan.request.runtime),
                  timeline.ranks);
  timeline.metrics = ComputeMetrics(timeline.ranks, LowerBoundWithProof(plan, costs));
  SimulationCounted::Add();
  return timeline;
}

}  // namespace pipeplan
