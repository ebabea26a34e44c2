// Step metrics from per-rank timings. Shared by the simulator and the runtime, so predicted
// and measured timelines are summarised by the same definitions (timeline.h, docs/planning.md §4).
#pragma once

#include <span>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// Fills busy, first_start and last_end of `timeline` from the timings of the compute actions
// of `program` (index-aligned). Leaves memory fields alone.
void SummarizeComputeTimes(const RankProgram& program, RankTimeline& timeline);

// A measured rank's memory from its action_memory (index-aligned, memory_unit): the curve
// (each compute action's start, peak where above both ends, and end, in time order), the peak
// (the most any action held) and the peak activation memory (the peak less what the rank held
// when its first action began: parameters, gradients, optimizer state and data, the step's
// static memory). No-op without action_memory.
void SummarizeMeasuredMemory(const RankProgram& program, RankTimeline& timeline);

// Moves a rank's timings `offset` units earlier: its actions and their discarded first runs,
// and the memory curve that follows them (measured memory). For steps timed from the run's
// start rather than their own (steps without a barrier).
void ShiftRankTimeline(const RankProgram& program, double offset, RankTimeline& timeline);

// Makespan, bubble figures and the gap to `lower_bound` over summarised rank timelines.
Metrics ComputeMetrics(const std::vector<RankTimeline>& ranks, double lower_bound);

// The step with the median makespan (the lower of the middle two; the first of equals), the
// one 'run' reports and writes. `steps` must not be empty.
const Timeline& MedianStep(std::span<const Timeline> steps);

}  // namespace pipeplan
