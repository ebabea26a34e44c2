#include "pipeplan/simulation/measured_timeline.h"

#include <string>
#include <utility>

#include "pipeplan/simulation/clock_alignment.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/simulation/timeline_metrics.h"

namespace pipeplan {

StatusOr<Timeline> AssembleMeasuredTimeline(const Plan& plan, std::vector<RankTimeline> ranks,
                                            std::vector<double>* shifts) {
  if (ranks.size() != plan.programs.size()) {
    return InvalidArgument("got timelines of " + std::to_string(ranks.size()) +
                           " ranks for a plan of " + std::to_string(plan.programs.size()));
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].rank.value != static_cast<int>(r) ||
        ranks[r].actions.size() != plan.programs[r].actions.size()) {
      return InvalidArgument("the timeline given for rank " + std::to_string(r) +
                             " does not match that rank's program");
    }
  }
  // Each process started its clock at its own moment (a barrier's exit, a trace's clock).
  std::vector<double> offsets = AlignRankClocks(plan, ranks);
  if (shifts != nullptr) *shifts = std::move(offsets);
  Timeline timeline;
  timeline.source = TimelineSource::kMeasured;
  for (size_t r = 0; r < ranks.size(); ++r) {
    timeline.ranks.push_back(std::move(ranks[r]));
    SummarizeComputeTimes(plan.programs[r], timeline.ranks.back());
  }
  timeline.metrics = ComputeMetrics(timeline.ranks, LowerBound(plan, plan.request.costs));
  return timeline;
}

}  // namespace pipeplan
