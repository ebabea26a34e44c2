// What a cost model's figure sources (cost_model.h: given, measured or assumed) mean for a
// plan: which kinds a plan reads, which the model assumed, and what to tell the user. Advice
// that rests on an assumed figure must say so: a runtime's split backward can cost far more
// than its full one.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/plan.h"

namespace pipeplan {

// The compute kinds whose figures a plan's actions read, as a set of flags.
struct FigureKinds {
  bool forward = false;
  bool backward = false;
  bool split = false;    // I and W, which calibrate measures or assumes together
  bool overlap = false;  // an F&B cell's own figure (not F + B)

  bool operator==(const FigureKinds&) const = default;
};

// What a cost model assumes anywhere, by kind: a kind counts when any stage's figure of it was
// assumed. Empty sources (given figures) assume nothing.
FigureKinds AssumedKinds(const CostModel& costs);

// The kinds `plan`'s compute reads under its own costs: F, B, I/W, and the cells' own figure
// where the cost model has one (a cell without one costs F + B).
FigureKinds KindsRead(const Plan& plan);

// The kinds both sets hold.
FigureKinds Common(const FigureKinds& a, const FigureKinds& b);

// "I + W = B", "B = I + W", "F&B cell = F + B" (and "F" should a forward ever be assumed),
// joined with " and ": what the assumed kinds stand for, for notes.
std::string DescribeAssumption(const FigureKinds& assumed);

// What `plan`'s simulated step rests on that no run measured, given the figures it was planned
// from (`costs` and `memory` as the user gave them, before any cut): measured per-stage figures
// cut by depth for the plan's stages ("figures cut by depth from 2 stages to 8", an estimate:
// a runtime's own time per action does not shrink with the stage) and the assumed kinds its
// compute reads (DescribeAssumption), joined with " and "; empty: nothing.
std::string DescribeAssumptions(const Plan& plan, const CostModel& costs,
                                const MemoryModel& memory);

// The sources cut to `stages` entries for a cost model cut again by depth (stage_recut.h): a
// kind is assumed on every new stage where any given stage assumed it, measured where every
// given stage measured it (the first one's run), given otherwise.
std::vector<StageSources> CollapseSources(const std::vector<StageSources>& sources, int stages);

}  // namespace pipeplan
