#include "pipeplan/model/figure_sources.h"

#include <algorithm>
#include <string>

#include "pipeplan/model/stage_recut.h"

namespace pipeplan {
namespace {

bool Assumed(const FigureSource& source) { return source.origin == FigureOrigin::kAssumed; }

// Whether a run measured any of the figures (a profile's), rather than a user giving them.
bool AnyMeasured(const CostModel& costs) {
  return std::any_of(costs.sources.begin(), costs.sources.end(), [](const StageSources& stage) {
    for (const FigureSource* source : {&stage.forward, &stage.backward, &stage.backward_input,
                                       &stage.backward_weight, &stage.overlap}) {
      if (source->origin == FigureOrigin::kMeasured) return true;
    }
    return false;
  });
}

// The worst of a kind's sources over the given stages: assumed beats given beats measured.
FigureSource Worst(const std::vector<StageSources>& sources, FigureSource StageSources::*figure) {
  FigureSource worst = sources.front().*figure;
  for (const StageSources& stage : sources) {
    const FigureSource& source = stage.*figure;
    if (Assumed(source)) return source;
    if (source.origin == FigureOrigin::kGiven) worst = source;
  }
  return worst;
}

}  // namespace

FigureKinds AssumedKinds(const CostModel& costs) {
  FigureKinds assumed;
  for (const StageSources& stage : costs.sources) {
    assumed.forward = assumed.forward || Assumed(stage.forward);
    assumed.backward = assumed.backward || Assumed(stage.backward);
    assumed.split =
        assumed.split || Assumed(stage.backward_input) || Assumed(stage.backward_weight);
    assumed.overlap = assumed.overlap || Assumed(stage.overlap);
  }
  return assumed;
}

FigureKinds KindsRead(const Plan& plan) {
  const CostModel& costs = plan.request.costs;
  FigureKinds read;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      switch (action.kind) {
        case ActionKind::kForward:
          read.forward = true;
          break;
        case ActionKind::kBackward:
          read.backward = true;
          break;
        case ActionKind::kBackwardInput:
        case ActionKind::kBackwardWeight:
          read.split = true;
          break;
        case ActionKind::kOverlapFB:
          // A cell without a figure of its own costs F + B (CostModel::ComputeTime).
          if (costs.Stage(action.stage).overlap > 0) {
            read.overlap = true;
          } else {
            read.forward = true;
            read.backward = true;
          }
          break;
        case ActionKind::kSendForward:
        case ActionKind::kRecvForward:
        case ActionKind::kSendBackward:
        case ActionKind::kRecvBackward:
        case ActionKind::kPostValidation:
        case ActionKind::kSendPostValidation:
        case ActionKind::kRecvPostValidation:
          break;
      }
    }
  }
  return read;
}

FigureKinds Common(const FigureKinds& a, const FigureKinds& b) {
  return {.forward = a.forward && b.forward,
          .backward = a.backward && b.backward,
          .split = a.split && b.split,
          .overlap = a.overlap && b.overlap};
}

std::string DescribeAssumption(const FigureKinds& assumed) {
  std::string out;
  const auto add = [&](bool kind, const char* text) {
    if (!kind) return;
    out += out.empty() ? "" : " and ";
    out += text;
  };
  add(assumed.forward, "F (no run measured it)");
  add(assumed.split, "I + W = B");
  add(assumed.backward, "B = I + W");
  add(assumed.overlap, "F&B cell = F + B");
  return out;
}

std::string DescribeAssumptions(const Plan& plan, const CostModel& costs,
                                const MemoryModel& memory) {
  std::string out;
  const Topology& topology = plan.request.topology;
  if (AnyMeasured(costs) && !FitsAsGiven(costs, memory, topology)) {
    out = "figures cut by depth from " + std::to_string(costs.stages.size()) + " stages to " +
          std::to_string(topology.num_stages());
  }
  const std::string kinds = DescribeAssumption(Common(KindsRead(plan), AssumedKinds(costs)));
  if (!kinds.empty()) out += (out.empty() ? "" : " and ") + kinds;
  return out;
}

std::vector<StageSources> CollapseSources(const std::vector<StageSources>& sources, int stages) {
  if (sources.empty() || sources.size() == static_cast<size_t>(stages)) return sources;
  const StageSources collapsed{.forward = Worst(sources, &StageSources::forward),
                               .backward = Worst(sources, &StageSources::backward),
                               .backward_input = Worst(sources, &StageSources::backward_input),
                               .backward_weight = Worst(sources, &StageSources::backward_weight),
                               .overlap = Worst(sources, &StageSources::overlap)};
  return std::vector<StageSources>(static_cast<size_t>(std::max(stages, 1)), collapsed);
}

}  // namespace pipeplan
