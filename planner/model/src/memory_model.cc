#include "pipeplan/model/memory_model.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pipeplan {

namespace {

const StageMemory& Entry(const std::vector<StageMemory>& stages, StageId stage) {
  return stages.size() == 1 ? stages.front() : stages[stage.value];
}

Status CheckFigure(double value, const std::string& where) {
  if (!std::isfinite(value) || value < 0) {
    return InvalidArgument(where + " must be a finite number >= 0, got " + std::to_string(value));
  }
  return Status::Ok();
}

}  // namespace

double MemoryModel::Activation(StageId stage, int stages_per_rank) const {
  const double activation = Entry(stages, stage).activation;
  return activation > 0 ? activation : 1.0 / stages_per_rank;
}

double MemoryModel::FreedByInput(StageId stage, int stages_per_rank) const {
  return std::min(Entry(stages, stage).freed_by_input, Activation(stage, stages_per_rank));
}

double MemoryModel::Change(ActionKind kind, StageId stage, int stages_per_rank) const {
  const double activation = Activation(stage, stages_per_rank);
  const double by_input = FreedByInput(stage, stages_per_rank);
  switch (kind) {
    case ActionKind::kForward:
      return activation;
    case ActionKind::kBackward:
      return -activation;
    case ActionKind::kBackwardInput:
      return -by_input;
    case ActionKind::kBackwardWeight:
      return -(activation - by_input);
    case ActionKind::kOverlapFB:  // its parts count, not the cell
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

MemoryModel SplitShareMemory(MemoryModel share, int chunks) {
  if (chunks <= 1) return share;
  for (StageMemory& stage : share.stages) {
    stage.activation /= chunks;
    stage.freed_by_input /= chunks;
  }
  return share;
}

Status ValidateMemoryModel(const MemoryModel& memory, int num_stages) {
  if (memory.stages.size() != 1 && memory.stages.size() != static_cast<size_t>(num_stages)) {
    return InvalidArgument("memory model has " + std::to_string(memory.stages.size()) +
                           " stage entries; expected 1 (uniform) or " + std::to_string(num_stages));
  }
  for (size_t s = 0; s < memory.stages.size(); ++s) {
    const std::string where = "memory.stages[" + std::to_string(s) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.stages[s].activation, where + "activation"));
    PIPEPLAN_RETURN_IF_ERROR(
        CheckFigure(memory.stages[s].freed_by_input, where + "freed_by_input"));
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.static_per_rank, "memory.static_per_rank"));
  if (!memory.unit.empty() && memory.unit != kBytesUnit) {
    return InvalidArgument("memory.unit: '" + memory.unit + "' is not a memory unit (\"" +
                           std::string(kBytesUnit) + "\", or empty for microbatch activations)");
  }
  if (memory.limit.has_value()) {
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(*memory.limit, "memory limit"));
  }
  return Status::Ok();
}

}  // namespace pipeplan
