// Per-stage figures (a cost file with an entry per stage or boundary, as `pipeplan calibrate`
// writes from a profile) describe one cut of the model into stages. A plan with another
// number of stages (another V, another strategy) gets the same model cut again by depth:
// entry i of S covers the chain's depth [i/S, (i+1)/S), and a new stage takes what the depth
// it covers held. An estimate (layers are assumed to cost alike within a profiled stage);
// profiling a plan with the wanted V measures it.
#pragma once

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// `costs` for a chain of `stages` stages: the durations (F, B, I, W, overlap) by depth, each
// new boundary the given one nearest in depth. Uniform figures (one entry) stay as they are.
CostModel RecutChainCosts(const CostModel& costs, int stages);

// `memory` for a chain of `stages` stages. By depth: the activation past its received input,
// what I frees, the stage's static bytes. The largest of the old stages it overlaps: each
// transient (one layer's workspace at a time). The model's (largest) message: the received
// input and the retained input gradient but on the first stage, the received gradient but
// on the last. `given_chunks_per_share` resolves the default activation of the given
// entries (MemoryModel::Activation). Uniform figures stay as they are.
MemoryModel RecutChainMemory(const MemoryModel& memory, int given_chunks_per_share, int stages);

struct StageFigures {
  CostModel costs;
  MemoryModel memory;
};

// The figures for `topology` where their entries do not fit its stages (or boundaries), or are
// of other chains (CostModel::chains: figures of a dual placement's two copies for a plan of
// one chain, or the reverse): one chain of the model (the first copy of two) cut by depth,
// dual placement's two chains each the whole model; what is cut says the topology's chains.
// Figures that fit, or are uniform, stay as they are. `static_by_rank` of another number of
// ranks gives way to the largest of it, for every rank (static_per_rank). Figures to cut are
// checked first (ValidateCostModel, ValidateMemoryModel against their own number of entries), so
// that an error names the entry as given. `topology` must be valid.
StatusOr<StageFigures> FitStageFigures(const CostModel& costs, const MemoryModel& memory,
                                       const Topology& topology);

// Whether FitStageFigures keeps the figures' per-stage entries as they are for `topology`
// (uniform, or one entry per stage and boundary of the same chains).
bool FitsAsGiven(const CostModel& costs, const MemoryModel& memory, const Topology& topology);

}  // namespace pipeplan
