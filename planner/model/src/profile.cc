#include "pipeplan/model/profile.h"

#include <cmath>
#include <string>
#include <utility>

#include "pipeplan/model/text_format.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {
namespace {

// Error helpers for ValidateProfile: "stages[2].backward.p90: ...".
Status CheckFigure(double value, const std::string& path) {
  if (std::isfinite(value) && value >= 0) return Status::Ok();
  return InvalidArgument(path + ": must be a finite number >= 0, got " + FormatNumber(value));
}

// `signed_figures`: a memory change, which may be negative (an I that allocates more than
// it frees); every other figure is >= 0.
Status CheckStats(const DurationStats& stats, const std::string& path,
                  bool signed_figures = false) {
  if (stats.samples < 0) {
    return InvalidArgument(path + ".samples: must be >= 0, got " + std::to_string(stats.samples));
  }
  const std::pair<const char*, double> figures[] = {{"min", stats.min},
                                                    {"p10", stats.p10},
                                                    {"median", stats.median},
                                                    {"p90", stats.p90},
                                                    {"max", stats.max}};
  for (const auto& [name, value] : figures) {
    if (signed_figures && !std::isfinite(value)) {
      return InvalidArgument(path + "." + name + ": must be a finite number, got " +
                             FormatNumber(value));
    }
    if (!signed_figures) PIPEPLAN_RETURN_IF_ERROR(CheckFigure(value, path + "." + name));
    if (stats.samples == 0 && value != 0) {
      return InvalidArgument(path + "." + name + ": is " + FormatNumber(value) +
                             " but samples is 0 (nothing measured)");
    }
  }
  for (size_t i = 1; i < std::size(figures); ++i) {
    if (figures[i - 1].second > figures[i].second) {
      return InvalidArgument(path + ": " + figures[i - 1].first + " " +
                             FormatNumber(figures[i - 1].second) + " is above " + figures[i].first +
                             " " + FormatNumber(figures[i].second));
    }
  }
  if (!signed_figures) PIPEPLAN_RETURN_IF_ERROR(CheckFigure(stats.mean, path + ".mean"));
  // 0 with samples: written before the mean was recorded.
  if (stats.mean != 0 && (stats.mean < stats.min || stats.mean > stats.max)) {
    return InvalidArgument(path + ".mean: " + FormatNumber(stats.mean) + " is outside [min " +
                           FormatNumber(stats.min) + ", max " + FormatNumber(stats.max) + "]");
  }
  return Status::Ok();
}

Status CheckStageMemory(const StageMemoryProfile& m, const std::string& path) {
  const std::pair<const char*, const DurationStats*> changes[] = {
      {"kept_by_forward", &m.kept_by_forward},
      {"freed_by_backward", &m.freed_by_backward},
      {"freed_by_input", &m.freed_by_input},
      {"freed_by_weight", &m.freed_by_weight}};
  for (const auto& [name, stats] : changes) {
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(*stats, path + name, /*signed_figures=*/true));
  }
  const std::pair<const char*, const DurationStats*> transients[] = {
      {"forward_transient", &m.forward_transient}, {"backward_transient", &m.backward_transient},
      {"input_transient", &m.input_transient},     {"weight_transient", &m.weight_transient},
      {"received_forward", &m.received_forward},   {"received_backward", &m.received_backward}};
  for (const auto& [name, stats] : transients) {
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(*stats, path + name));
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(m.static_bytes, path + "static_bytes"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(m.input_bytes, path + "input_bytes"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(m.target_bytes, path + "target_bytes"));
  PIPEPLAN_RETURN_IF_ERROR(CheckFigure(m.gradient_bytes, path + "gradient_bytes"));
  if (m.input_bytes + m.target_bytes > m.static_bytes) {
    return InvalidArgument(path + "input_bytes + " + path +
                           "target_bytes: " + FormatNumber(m.input_bytes + m.target_bytes) +
                           " are above static_bytes " + FormatNumber(m.static_bytes) +
                           " (the data are a part of them)");
  }
  if (m.microbatches < 0 || (m.microbatches == 0 && m.input_bytes + m.target_bytes > 0)) {
    return InvalidArgument(path + "microbatches: must be >= 1 where the stage holds data, got " +
                           std::to_string(m.microbatches));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateProfile(const Profile& profile) {
  if (profile.steps < 0) {
    return InvalidArgument("steps: must be >= 0, got " + std::to_string(profile.steps));
  }
  if (profile.stages.empty()) return InvalidArgument("stages: the profile has no stages");
  if (profile.boundaries.size() != profile.stages.size() - 1) {
    return InvalidArgument("boundaries: expected " + std::to_string(profile.stages.size() - 1) +
                           " entries (one between each two of the " +
                           std::to_string(profile.stages.size()) + " stages), got " +
                           std::to_string(profile.boundaries.size()));
  }
  PIPEPLAN_RETURN_IF_ERROR(ValidateChains(profile.chains, profile.stages.size(), "chains"));
  for (size_t s = 0; s < profile.stages.size(); ++s) {
    const StageProfile& stage = profile.stages[s];
    const std::string path = "stages[" + std::to_string(s) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(stage.forward, path + "forward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(stage.backward, path + "backward"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(stage.backward_input, path + "backward_input"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(stage.backward_weight, path + "backward_weight"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(stage.overlap, path + "overlap"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStageMemory(stage.memory, path + "memory."));
  }
  for (size_t r = 0; r < profile.static_bytes.size(); ++r) {
    PIPEPLAN_RETURN_IF_ERROR(
        CheckFigure(profile.static_bytes[r], "static_bytes[" + std::to_string(r) + "]"));
  }
  if (!profile.own_static_bytes.empty() &&
      profile.own_static_bytes.size() != profile.static_bytes.size()) {
    return InvalidArgument("own_static_bytes: " + std::to_string(profile.own_static_bytes.size()) +
                           " entries for " + std::to_string(profile.static_bytes.size()) +
                           " ranks in static_bytes");
  }
  for (size_t r = 0; r < profile.own_static_bytes.size(); ++r) {
    const std::string path = "own_static_bytes[" + std::to_string(r) + "]";
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(profile.own_static_bytes[r], path));
    if (profile.own_static_bytes[r] > profile.static_bytes[r]) {
      return InvalidArgument(path + ": " + FormatNumber(profile.own_static_bytes[r]) +
                             " is above the rank's static_bytes " +
                             FormatNumber(profile.static_bytes[r]) + " (it is a part of them)");
    }
  }
  for (size_t b = 0; b < profile.boundaries.size(); ++b) {
    const BoundaryProfile& boundary = profile.boundaries[b];
    const std::string path = "boundaries[" + std::to_string(b) + "].";
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(boundary.transfer, path + "transfer"));
    if (boundary.late_receives < 0) {
      return InvalidArgument(path + "late_receives: must be >= 0, got " +
                             std::to_string(boundary.late_receives));
    }
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(boundary.latency, path + "latency"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(boundary.bandwidth, path + "bandwidth"));
    PIPEPLAN_RETURN_IF_ERROR(CheckFigure(boundary.activation_bytes, path + "activation_bytes"));
    PIPEPLAN_RETURN_IF_ERROR(CheckStats(boundary.receive_overhead, path + "receive_overhead"));
    if (boundary.receive_overhead.samples > boundary.late_receives) {
      return InvalidArgument(
          path + "receive_overhead.samples: " + std::to_string(boundary.receive_overhead.samples) +
          " is above late_receives " + std::to_string(boundary.late_receives) +
          " (its samples are late receives)");
    }
  }
  return Status::Ok();
}

}  // namespace pipeplan
