#include "pipeplan/model/memory_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "pipeplan/model/text_format.h"
#include "pipeplan/model/topology.h"

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

double MemoryModel::Retained(StageId stage, int stages_per_rank) const {
  return std::min(Entry(stages, stage).retained, Activation(stage, stages_per_rank));
}

double MemoryModel::ReceivedMessage(ActionKind recv, StageId stage, int stages_per_rank) const {
  const StageMemory& entry = Entry(stages, stage);
  if (recv == ActionKind::kRecvForward) {
    return std::min(entry.received_input, Activation(stage, stages_per_rank));
  }
  return recv == ActionKind::kRecvBackward ? entry.received_gradient : 0.0;
}

double MemoryModel::FreedByInput(StageId stage, int stages_per_rank) const {
  return std::min(Entry(stages, stage).freed_by_input, Activation(stage, stages_per_rank));
}

namespace {

// What one compute part does to its rank's memory: the change (MemoryModel::Change) and the
// transient; zeros for the kinds that are not F, B, I or W.
struct PartMemory {
  double change = 0.0;
  double transient = 0.0;
};

PartMemory MemoryOfPart(const MemoryModel& memory, ActionKind kind, StageId stage,
                        int stages_per_rank) {
  const StageMemory& entry = Entry(memory.stages, stage);
  const double activation = memory.Activation(stage, stages_per_rank);
  const double released = activation - memory.Retained(stage, stages_per_rank);
  const double by_input =
      std::min(memory.FreedByInput(stage, stages_per_rank), released) - entry.allocated_by_input;
  switch (kind) {
    case ActionKind::kForward:
      return {activation, entry.forward_transient};
    case ActionKind::kBackward:
      return {-released, entry.backward_transient};
    case ActionKind::kBackwardInput:
      return {-by_input, entry.input_transient};
    case ActionKind::kBackwardWeight:
      return {-std::max(released - by_input - entry.split_retained_extra, 0.0),
              entry.weight_transient};
    case ActionKind::kOverlapFB:  // its parts count, not the cell
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return {};
  }
  return {};
}

}  // namespace

double MemoryModel::Change(ActionKind kind, StageId stage, int stages_per_rank) const {
  return MemoryOfPart(*this, kind, stage, stages_per_rank).change;
}

double MemoryModel::Transient(ActionKind kind, StageId stage) const {
  // A transient does not depend on V; any stages_per_rank does.
  return MemoryOfPart(*this, kind, stage, 1).transient;
}

double MemoryModel::Gradient(StageId stage) const { return Entry(stages, stage).gradient; }

double MemoryModel::StaticOf(RankId rank, const StageMap& map) const {
  const auto r = static_cast<size_t>(rank.value);
  double bytes = r < static_by_rank.size() ? static_by_rank[r] : static_per_rank;
  for (const StageId stage : map.StagesOf(rank)) {
    bytes += Entry(stages, stage).static_bytes;
    const double microbatches = map.MicrobatchesOf(stage);
    if (map.IsFirst(stage)) {
      bytes += first_stage_static + microbatches * first_stage_data_per_microbatch;
    }
    if (map.IsLast(stage)) {
      bytes += last_stage_static + microbatches * last_stage_data_per_microbatch;
    }
  }
  return bytes;
}

double MemoryModel::LargestFixed(const StageMap& map, int microbatch_stages) const {
  // Gradients allocated in the step count as static: the step's peak may come after them.
  double most_static = 0.0;
  for (int r = 0; r < map.num_ranks(); ++r) {
    double gradients = 0.0;
    for (const StageId stage : map.StagesOf(RankId(r))) gradients += Gradient(stage);
    most_static = std::max(most_static, StaticOf(RankId(r), map) + gradients);
  }
  double transient = 0.0;
  double retained = 0.0;
  for (const StageMemory& stage : stages) {
    transient = std::max({transient, stage.forward_transient, stage.backward_transient,
                          stage.input_transient, stage.weight_transient});
    retained = std::max(retained, stage.retained);
  }
  return most_static + transient + std::max(microbatch_stages, 0) * retained;
}

std::string MemoryModel::Describe(double value) const {
  if (unit != MemoryUnit::kBytes) return FormatNumber(value);
  return FormatBytes(value) + " (" + FormatFixed(std::ceil(value), 0) + " B)";
}

std::string FormatMemory(double value, const MemoryModel& memory) {
  return memory.unit == MemoryUnit::kBytes ? FormatBytes(value) : FormatCompact(value);
}

bool MemoryModel::HasTransientOrRetained() const {
  return std::any_of(stages.begin(), stages.end(), [](const StageMemory& stage) {
    return stage.forward_transient > 0 || stage.backward_transient > 0 ||
           stage.input_transient > 0 || stage.weight_transient > 0 || stage.retained > 0;
  });
}

bool MemoryModel::LargestFixedIsEveryRanks(const StageMap& map) const {
  if (HasTransientOrRetained()) return false;
  const auto fixed = [&](int rank) {
    double bytes = StaticOf(RankId(rank), map);
    for (const StageId stage : map.StagesOf(RankId(rank))) bytes += Gradient(stage);
    return bytes;
  };
  for (int r = 1; r < map.num_ranks(); ++r) {
    if (fixed(r) != fixed(0)) return false;
  }
  return true;
}

const char* MemoryModel::FixedName() const {
  return HasTransientOrRetained() ? "static + transient + retained" : "static";
}

const char* MemoryModel::SmallestLimitPhrase(const StageMap& map) const {
  return LargestFixedIsEveryRanks(map) ? "the smallest limit that works is "
                                       : "the smallest limit it orders under is ";
}

namespace {

// What scales with a stage's depth: its activation, what I frees, its own static bytes.
template <typename Scale>
MemoryModel ScaleStageMemory(MemoryModel memory, Scale scale) {
  for (StageMemory& stage : memory.stages) {
    const double input = std::min(stage.received_input, stage.activation);
    stage.activation = input + scale(stage.activation - input);
    for (double* figure : {&stage.freed_by_input, &stage.static_bytes, &stage.gradient,
                           &stage.allocated_by_input, &stage.split_retained_extra}) {
      *figure = scale(*figure);
    }
  }
  return memory;
}

}  // namespace

MemoryModel SplitShareMemory(MemoryModel share, int chunks) {
  if (chunks <= 1) return share;
  return ScaleStageMemory(std::move(share), [chunks](double x) { return x / chunks; });
}

MemoryModel ShareOfStageMemory(MemoryModel stage, int chunks) {
  if (chunks <= 1) return stage;
  return ScaleStageMemory(std::move(stage), [chunks](double x) { return x * chunks; });
}

Status ValidateMemoryModel(const MemoryModel& memory, int num_stages) {
  if (memory.stages.size() != 1 && memory.stages.size() != static_cast<size_t>(num_stages)) {
    return InvalidArgument("memory model has " + std::to_string(memory.stages.size()) +
                           " stage entries; expected 1 (uniform) or " + std::to_string(num_stages));
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateChains(memory.chains, memory.stages.size(), "memory.chains"));
  for (size_t s = 0; s < memory.stages.size(); ++s) {
    const std::string where = "memory.stages[" + std::to_string(s) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.stages[s].activation, where + "activation"));
    PIPEPLAN_RETURN_IF_ERROR(
        CheckFigure(memory.stages[s].freed_by_input, where + "freed_by_input"));
    const StageMemory& stage = memory.stages[s];
    for (const auto& [value, name] :
         {std::pair{stage.forward_transient, "forward_transient"},
          std::pair{stage.backward_transient, "backward_transient"},
          std::pair{stage.input_transient, "input_transient"},
          std::pair{stage.weight_transient, "weight_transient"},
          std::pair{stage.retained, "retained"}, std::pair{stage.static_bytes, "static_bytes"},
          std::pair{stage.received_input, "received_input"},
          std::pair{stage.received_gradient, "received_gradient"},
          std::pair{stage.gradient, "gradient"},
          std::pair{stage.allocated_by_input, "allocated_by_input"},
          std::pair{stage.split_retained_extra, "split_retained_extra"}}) {
      PIPEPLAN_RETURN_IF_ERROR(CheckFigure(value, where + name));
    }
    const double backward = std::max(stage.backward_transient, stage.input_transient);
    if (stage.received_gradient > backward) {
      return InvalidArgument(where + "received_gradient: " + FormatNumber(stage.received_gradient) +
                             " is above the backward's transient (" + FormatNumber(backward) +
                             "), which counts the received gradient while the backward runs");
    }
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.static_per_rank, "memory.static_per_rank"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.first_stage_static, "memory.first_stage_static"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.last_stage_static, "memory.last_stage_static"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(memory.first_stage_data_per_microbatch,
                                       "memory.first_stage_data_per_microbatch"));
  PIPEPLAN_RETURN_IF_ERROR(
      CheckFigure(memory.last_stage_data_per_microbatch, "memory.last_stage_data_per_microbatch"));
  for (size_t r = 0; r < memory.static_by_rank.size(); ++r) {
    PIPEPLAN_RETURN_IF_ERROR(
        CheckFigure(memory.static_by_rank[r], "memory.static_by_rank[" + std::to_string(r) + "]"));
  }
  if (memory.limit.has_value()) {
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(*memory.limit, "memory limit"));
  }
  return Status::Ok();
}

Status ValidateStaticByRank(const MemoryModel& memory, int ranks) {
  if (memory.static_by_rank.empty() || memory.static_by_rank.size() == static_cast<size_t>(ranks)) {
    return Status::Ok();
  }
  return InvalidArgument("memory.static_by_rank has " +
                         std::to_string(memory.static_by_rank.size()) +
                         " entries (one per rank of the profiled run) but the plan has " +
                         std::to_string(ranks) + " ranks");
}

}  // namespace pipeplan
