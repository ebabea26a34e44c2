#include "pipeplan/runtime/timeline_exchange.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/simulation/measured_timeline.h"
#include "pipeplan/simulation/timeline_metrics.h"

namespace pipeplan::runtime {
namespace {

std::string TimelineKey(int rank, int step) {
  return "timeline/" + std::to_string(rank) + "/" + std::to_string(step);
}

StatusOr<RankTimeline> FetchTimeline(Coordinator& coordinator, int rank, int step,
                                     std::chrono::milliseconds timeout) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes,
                            coordinator.Get(TimelineKey(rank, step), timeout));
  PIPEPLAN_ASSIGN_OR_RETURN(Timeline carrier, ParseTimeline(bytes, ProtoFormat::kBinary));
  if (carrier.ranks.size() != 1) {
    return Internal("rank " + std::to_string(rank) + " sent no timeline for step " +
                    std::to_string(step));
  }
  return std::move(carrier.ranks.front());
}

}  // namespace

Status PublishTimelines(Coordinator& coordinator, RankId rank, std::vector<RankTimeline> steps) {
  for (size_t step = 0; step < steps.size(); ++step) {
    Timeline carrier;
    carrier.ranks.push_back(std::move(steps[step]));
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string bytes,
                              SerializeTimeline(carrier, ProtoFormat::kBinary));
    PIPEPLAN_RETURN_IF_ERROR(
        coordinator.Put(TimelineKey(rank.value, static_cast<int>(step)), bytes));
  }
  return Status::Ok();
}

StatusOr<std::vector<Timeline>> GatherTimelines(Coordinator& coordinator, const Plan& plan,
                                                int steps, std::chrono::milliseconds timeout,
                                                std::vector<double>* added,
                                                std::vector<double>* starts) {
  std::vector<Timeline> gathered;
  double previous_end = 0.0;
  for (int step = 0; step < steps; ++step) {
    std::vector<RankTimeline> ranks;
    for (int r = 0; r < plan.request.topology.ranks; ++r) {
      PIPEPLAN_ASSIGN_OR_RETURN(RankTimeline timeline,
                                FetchTimeline(coordinator, r, step, timeout));
      ranks.push_back(std::move(timeline));
    }
    // Without the step barrier: from the run's start to the step's earliest action.
    double start = 0.0;
    if (added != nullptr) {
      start = std::numeric_limits<double>::infinity();
      for (const RankTimeline& rank : ranks) {
        for (const ActionTiming& action : rank.actions) start = std::min(start, action.start);
      }
      for (size_t r = 0; r < ranks.size(); ++r) {
        ShiftRankTimeline(plan.programs[r], start, ranks[r]);
      }
    }
    PIPEPLAN_ASSIGN_OR_RETURN(Timeline timeline, AssembleMeasuredTimeline(plan, std::move(ranks)));
    // The step ends where RunLocal's does: its makespan after its start.
    const double end = start + timeline.metrics.makespan;
    if (added != nullptr && step > 0) added->push_back(end - previous_end);
    if (added != nullptr && starts != nullptr) starts->push_back(start);
    previous_end = end;
    gathered.push_back(std::move(timeline));
  }
  return gathered;
}

Status LeaveTogether(Coordinator& coordinator, int rank, int world_size,
                     std::chrono::milliseconds timeout) {
  PIPEPLAN_RETURN_IF_ERROR(coordinator.Barrier("done", timeout));
  if (rank != 0) return coordinator.Put("left/" + std::to_string(rank), "");
  for (int other = 1; other < world_size; ++other) {
    PIPEPLAN_RETURN_IF_ERROR(coordinator.Get("left/" + std::to_string(other), timeout).status());
  }
  return Status::Ok();
}

}  // namespace pipeplan::runtime
