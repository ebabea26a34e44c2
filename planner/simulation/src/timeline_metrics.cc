#include "pipeplan/simulation/timeline_metrics.h"

#include <algorithm>

namespace pipeplan {

void SummarizeComputeTimes(const RankProgram& program, RankTimeline& timeline) {
  timeline.busy = 0.0;
  timeline.first_start = 0.0;
  timeline.last_end = 0.0;
  bool first = true;
  const size_t count = std::min(program.actions.size(), timeline.actions.size());
  for (size_t i = 0; i < count; ++i) {
    if (!IsCompute(program.actions[i].kind)) continue;
    const ActionTiming& t = timeline.actions[i];
    if (first) timeline.first_start = t.start;
    first = false;
    timeline.last_end = std::max(timeline.last_end, t.end);
    timeline.busy += t.end - t.start;
  }
}

void SummarizeMeasuredMemory(const RankProgram& program, RankTimeline& timeline) {
  if (timeline.action_memory.empty()) return;
  const size_t count =
      std::min({program.actions.size(), timeline.actions.size(), timeline.action_memory.size()});
  timeline.memory.clear();
  timeline.peak_memory = 0.0;
  // The rank's first action (a receive, or its first compute) begins on its static memory.
  const double at_first = count > 0 ? timeline.action_memory.front().start : 0.0;
  for (size_t i = 0; i < count; ++i) {
    const ActionMemory& m = timeline.action_memory[i];
    timeline.peak_memory = std::max(timeline.peak_memory, m.peak);
    if (!IsCompute(program.actions[i].kind)) continue;
    const ActionTiming& t = timeline.actions[i];
    timeline.memory.push_back({.time = t.start, .bytes = m.start});
    if (m.peak > std::max(m.start, m.end)) {
      timeline.memory.push_back({.time = (t.start + t.end) / 2, .bytes = m.peak});
    }
    timeline.memory.push_back({.time = t.end, .bytes = m.end});
  }
  std::stable_sort(timeline.memory.begin(), timeline.memory.end(),
                   [](const MemorySample& a, const MemorySample& b) { return a.time < b.time; });
  timeline.peak_activation_memory = timeline.peak_memory - at_first;
}

void ShiftRankTimeline(const RankProgram& program, double offset, RankTimeline& timeline) {
  for (ActionTiming& action : timeline.actions) {
    action.start -= offset;
    action.end -= offset;
  }
  for (DiscardedRun& run : timeline.discarded) {
    run.timing.start -= offset;
    run.timing.end -= offset;
  }
  SummarizeMeasuredMemory(program, timeline);
}

Metrics ComputeMetrics(const std::vector<RankTimeline>& ranks, double lower_bound) {
  Metrics metrics;
  for (const RankTimeline& rank : ranks)
    metrics.makespan = std::max(metrics.makespan, rank.last_end);
  double longest_span = -1.0;
  double sum_fraction = 0.0;
  for (const RankTimeline& rank : ranks) {
    const double fraction = metrics.makespan > 0 ? 1.0 - rank.busy / metrics.makespan : 0.0;
    metrics.bubble_fraction_max = std::max(metrics.bubble_fraction_max, fraction);
    sum_fraction += fraction;
    const double span = rank.last_end - rank.first_start;
    if (span > longest_span) {
      longest_span = span;
      metrics.zb_bubble_rate = span > 0 ? (span - rank.busy) / span : 0.0;
    }
  }
  metrics.bubble_fraction_mean =
      ranks.empty() ? 0.0 : sum_fraction / static_cast<double>(ranks.size());
  metrics.lower_bound = lower_bound;
  metrics.gap_to_lower_bound = lower_bound > 0 ? metrics.makespan / lower_bound - 1.0 : 0.0;
  return metrics;
}

const Timeline& MedianStep(std::span<const Timeline> steps) {
  std::vector<const Timeline*> sorted;
  sorted.reserve(steps.size());
  for (const Timeline& step : steps) sorted.push_back(&step);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Timeline* a, const Timeline* b) {
    return a->metrics.makespan < b->metrics.makespan;
  });
  return *sorted[(sorted.size() - 1) / 2];
}

}  // namespace pipeplan
