#include "pipeplan/model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "pipeplan/model/topology.h"

namespace pipeplan {
namespace {

Status CheckFigure(double value, const std::string& where) {
  if (!std::isfinite(value) || value < 0) {
    return InvalidArgument(where + " must be a finite number >= 0, got " + std::to_string(value));
  }
  return Status::Ok();
}

}  // namespace

const StageCosts& CostModel::Stage(StageId stage) const {
  return stages.size() == 1 ? stages.front() : stages[stage.value];
}

double CostModel::ComputeTime(const Action& action) const {
  const StageCosts& c = Stage(action.stage);
  switch (action.kind) {
    case ActionKind::kForward:
      return c.forward;
    case ActionKind::kBackward:
      return c.backward;
    case ActionKind::kBackwardInput:
      return c.backward_input;
    case ActionKind::kBackwardWeight:
      return c.backward_weight;
    case ActionKind::kOverlapFB: {
      if (c.overlap > 0) return c.overlap;
      double sum = 0;
      for (const Action& sub : action.sub_actions) sum += ComputeTime(sub);
      return sum;
    }
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return 0.0;
  }
  return 0.0;
}

const BoundaryCosts& CostModel::Boundary(StageId from, StageId to) const {
  // Clamped: a plan the validator rejects may pair the last stage with itself.
  const auto boundary = static_cast<size_t>(std::max(0, std::min(from.value, to.value)));
  return boundaries[std::min(boundary, boundaries.size() - 1)];
}

double CostModel::TransferTime(StageId from, StageId to) const {
  const BoundaryCosts& b = Boundary(from, to);
  const double wire = b.bandwidth > 0 ? b.activation_bytes / b.bandwidth : 0.0;
  return b.latency + wire;
}

double CostModel::ReceiveOverhead(StageId from, StageId to) const {
  return Boundary(from, to).receive_overhead;
}

namespace {

template <typename Scale>
CostModel ScaleStageCosts(CostModel costs, Scale scale) {
  for (StageCosts& c : costs.stages) {
    for (double* figure :
         {&c.forward, &c.backward, &c.backward_input, &c.backward_weight, &c.overlap}) {
      *figure = scale(*figure);
    }
  }
  return costs;
}

}  // namespace

CostModel SplitShareCosts(CostModel share, int chunks) {
  if (chunks <= 1) return share;
  return ScaleStageCosts(std::move(share), [chunks](double x) { return x / chunks; });
}

CostModel ShareOfStageCosts(CostModel stage, int chunks) {
  if (chunks <= 1) return stage;
  return ScaleStageCosts(std::move(stage), [chunks](double x) { return x * chunks; });
}

namespace {

Status CheckSource(const FigureSource& source, size_t runs, const std::string& field) {
  switch (source.origin) {
    case FigureOrigin::kGiven:
    case FigureOrigin::kAssumed:
      return Status::Ok();
    case FigureOrigin::kMeasured:
      if (source.run >= 0 && static_cast<size_t>(source.run) < runs) return Status::Ok();
      return InvalidArgument(field + ".run is " + std::to_string(source.run) +
                             ", but costs.runs has " + std::to_string(runs) + " entries");
  }
  return InvalidArgument(field + ".origin is not given, measured or assumed");
}

}  // namespace

Status ValidateSources(const CostModel& costs) {
  if (costs.sources.empty()) return Status::Ok();
  if (costs.sources.size() != costs.stages.size()) {
    return InvalidArgument("costs.sources has " + std::to_string(costs.sources.size()) +
                           " entries, but costs.stages has " + std::to_string(costs.stages.size()) +
                           " (one per stage entry, or none)");
  }
  for (size_t s = 0; s < costs.sources.size(); ++s) {
    const StageSources& c = costs.sources[s];
    const std::string where = "costs.sources[" + std::to_string(s) + "].";
    const size_t runs = costs.runs.size();
    PIPEPLAN_RETURN_IF_ERROR(CheckSource(c.forward, runs, where + "forward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckSource(c.backward, runs, where + "backward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckSource(c.backward_input, runs, where + "backward_input"));
    PIPEPLAN_RETURN_IF_ERROR(CheckSource(c.backward_weight, runs, where + "backward_weight"));
    PIPEPLAN_RETURN_IF_ERROR(CheckSource(c.overlap, runs, where + "overlap"));
  }
  return Status::Ok();
}

Status ValidateCostModel(const CostModel& costs, int num_stages) {
  if (costs.stages.size() != 1 && costs.stages.size() != static_cast<size_t>(num_stages)) {
    return InvalidArgument("cost model has " + std::to_string(costs.stages.size()) +
                           " stage entries; expected 1 (uniform) or " + std::to_string(num_stages));
  }
  const size_t boundaries = num_stages > 1 ? static_cast<size_t>(num_stages - 1) : 1;
  if (costs.boundaries.size() != 1 && costs.boundaries.size() != boundaries) {
    return InvalidArgument("cost model has " + std::to_string(costs.boundaries.size()) +
                           " boundary entries; expected 1 (uniform) or " +
                           std::to_string(boundaries));
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateChains(costs.chains, costs.stages.size(), "costs.chains"));
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const StageCosts& c = costs.stages[s];
    const std::string where = "costs.stages[" + std::to_string(s) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(c.forward, where + "forward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(c.backward, where + "backward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(c.backward_input, where + "backward_input"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(c.backward_weight, where + "backward_weight"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(c.overlap, where + "overlap"));
  }
  for (size_t i = 0; i < costs.boundaries.size(); ++i) {
    const BoundaryCosts& b = costs.boundaries[i];
    const std::string where = "costs.boundaries[" + std::to_string(i) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(b.latency, where + "latency"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(b.bandwidth, where + "bandwidth"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(b.activation_bytes, where + "activation_bytes"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(b.receive_overhead, where + "receive_overhead"));
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateSources(costs));
  if (costs.memory.has_value()) {
    PIPEPLAN_RETURN_IF_ERROR(ValidateMemoryModel(*costs.memory, num_stages).WithContext("costs"));
  }
  return Status::Ok();
}

}  // namespace pipeplan
