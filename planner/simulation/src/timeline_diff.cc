#include "pipeplan/simulation/timeline_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace pipeplan {
namespace {

Status CheckShape(const Plan& plan, const Timeline& timeline, const char* which) {
  if (timeline.ranks.size() != plan.programs.size()) {
    return InvalidArgument(std::string("the ") + which + " timeline has " +
                           std::to_string(timeline.ranks.size()) + " ranks but the plan has " +
                           std::to_string(plan.programs.size()));
  }
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    if (timeline.ranks[r].actions.size() != plan.programs[r].actions.size()) {
      return InvalidArgument(std::string("rank ") + std::to_string(r) + " has " +
                             std::to_string(timeline.ranks[r].actions.size()) + " actions in the " +
                             which + " timeline but " +
                             std::to_string(plan.programs[r].actions.size()) + " in the plan");
    }
  }
  return Status::Ok();
}

struct KindSums {
  int count = 0;
  double duration_expected = 0.0;
  double duration_actual = 0.0;
  double start_error = 0.0;
  double abs_start_error = 0.0;
};

}  // namespace

StatusOr<TimelineDiff> DiffTimelines(const Plan& plan, const Timeline& expected,
                                     const Timeline& actual) {
  PIPEPLAN_RETURN_IF_ERROR(CheckShape(plan, expected, "first"));
  PIPEPLAN_RETURN_IF_ERROR(CheckShape(plan, actual, "second"));
  TimelineDiff diff;
  diff.step_expected = expected.metrics.makespan;
  diff.step_actual = actual.metrics.makespan;
  diff.relative_error = diff.step_expected > 0 ? diff.step_actual / diff.step_expected - 1 : 0;

  const auto in_bytes = [](const Timeline& t) {
    return !t.ranks.empty() &&
           std::all_of(t.ranks.begin(), t.ranks.end(),
                       [](const RankTimeline& r) { return r.memory_unit == MemoryUnit::kBytes; });
  };
  diff.memory_in_bytes = in_bytes(expected) && in_bytes(actual);
  std::map<ActionKind, KindSums> sums;
  double total_abs = 0.0;
  int total = 0;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const RankTimeline& e = expected.ranks[r];
    const RankTimeline& a = actual.ranks[r];
    diff.ranks.push_back({.rank = plan.programs[r].rank,
                          .busy_expected = e.busy,
                          .busy_actual = a.busy,
                          .idle_expected = diff.step_expected - e.busy,
                          .idle_actual = diff.step_actual - a.busy,
                          .peak_memory_expected = e.peak_memory,
                          .peak_memory_actual = a.peak_memory});
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionKind kind = actions[i].kind;
      if (!IsCompute(kind) && kind != ActionKind::kPostValidation) continue;
      const ActionTiming& te = e.actions[i];
      const ActionTiming& ta = a.actions[i];
      const double error = ta.start - te.start;
      KindSums& s = sums[kind];
      ++s.count;
      s.duration_expected += te.end - te.start;
      s.duration_actual += ta.end - ta.start;
      s.start_error += error;
      s.abs_start_error += std::abs(error);
      total_abs += std::abs(error);
      ++total;
      if (!diff.worst_start ||
          std::abs(error) > std::abs(diff.worst_start->actual - diff.worst_start->expected)) {
        diff.worst_start = OpStartError{plan.programs[r].rank, i, te.start, ta.start};
      }
    }
  }
  for (const auto& [kind, s] : sums) {
    const double n = s.count;
    diff.kinds.push_back({kind, s.count, s.duration_expected / n, s.duration_actual / n,
                          s.start_error / n, s.abs_start_error / n});
  }
  diff.mean_abs_start_error = total > 0 ? total_abs / total : 0.0;
  return diff;
}

}  // namespace pipeplan
