#include "pipeplan/measurement/calibrate.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/measurement/merge_profiles.h"
#include "pipeplan/model/figure_sources.h"
#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

bool Measured(const DurationStats& stats) { return stats.samples > 0; }

bool HasNoSamples(const StageProfile& stage) {
  return !Measured(stage.forward) && !Measured(stage.backward) && !Measured(stage.backward_input) &&
         !Measured(stage.backward_weight) && !Measured(stage.overlap);
}

StatusOr<StageCosts> CalibrateStage(const StageProfile& stage, double seconds_per_unit,
                                    double input_share) {
  if (HasNoSamples(stage)) return InvalidArgument("no samples (no F, B, I, W or overlap measured)");
  if (!Measured(stage.forward)) return InvalidArgument("no forward (F) measured");
  const bool has_input = Measured(stage.backward_input);
  const bool has_weight = Measured(stage.backward_weight);
  if (has_input != has_weight) {
    return InvalidArgument(std::string(has_input ? "I" : "W") + " measured without " +
                           (has_input ? "W" : "I") +
                           "; a split backward needs both halves measured, or neither");
  }
  if (!Measured(stage.backward) && !has_input) {
    return InvalidArgument("no backward measured (B, or I and W)");
  }
  const auto in_unit = [&](const DurationStats& stats) { return stats.median / seconds_per_unit; };
  StageCosts costs;
  costs.forward = in_unit(stage.forward);
  if (has_input) {
    costs.backward_input = in_unit(stage.backward_input);
    costs.backward_weight = in_unit(stage.backward_weight);
  }
  costs.backward = Measured(stage.backward) ? in_unit(stage.backward)
                                            : costs.backward_input + costs.backward_weight;
  if (!has_input) {
    costs.backward_input = input_share * costs.backward;
    costs.backward_weight = costs.backward - costs.backward_input;
  }
  costs.overlap = Measured(stage.overlap) ? in_unit(stage.overlap) : 0.0;
  return costs;
}

// A boundary's costs if the profile measured anything about it.
std::optional<BoundaryCosts> CalibrateBoundary(const BoundaryProfile& boundary,
                                               double seconds_per_unit) {
  if (boundary.latency > 0 || boundary.bandwidth > 0) {
    return BoundaryCosts{.latency = boundary.latency / seconds_per_unit,
                         .bandwidth = boundary.bandwidth * seconds_per_unit,
                         .activation_bytes = boundary.activation_bytes};
  }
  if (Measured(boundary.transfer)) {
    return BoundaryCosts{.latency = boundary.transfer.median / seconds_per_unit};
  }
  return std::nullopt;
}

// A boundary's receive overhead, where measured: the mean, not the median, since a step adds
// up the receives on its critical path and the tail counts.
std::optional<double> CalibrateReceiveOverhead(const BoundaryProfile& boundary,
                                               double seconds_per_unit) {
  if (!Measured(boundary.receive_overhead)) return std::nullopt;
  return boundary.receive_overhead.mean / seconds_per_unit;
}

double MeanOf(const std::vector<double>& values) {
  double sum = 0.0;
  for (const double x : values) sum += x;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// Mean latency of `measured`; bandwidth and activation bytes over the entries that have them.
BoundaryCosts MeanBoundary(const std::vector<BoundaryCosts>& measured) {
  BoundaryCosts mean;
  int with_bandwidth = 0;
  int with_bytes = 0;
  for (const BoundaryCosts& b : measured) {
    mean.latency += b.latency;
    if (b.bandwidth > 0) {
      mean.bandwidth += b.bandwidth;
      ++with_bandwidth;
    }
    if (b.activation_bytes > 0) {
      mean.activation_bytes += b.activation_bytes;
      ++with_bytes;
    }
  }
  if (!measured.empty()) mean.latency /= static_cast<double>(measured.size());
  if (with_bandwidth > 0) mean.bandwidth /= with_bandwidth;
  if (with_bytes > 0) mean.activation_bytes /= with_bytes;
  return mean;
}

// Mean of every figure over the stages; overlap over the stages that have one (0 = F + B).
StageCosts MeanStage(const std::vector<StageCosts>& stages) {
  StageCosts mean{
      .forward = 0, .backward = 0, .backward_input = 0, .backward_weight = 0, .overlap = 0};
  int with_overlap = 0;
  for (const StageCosts& s : stages) {
    mean.forward += s.forward;
    mean.backward += s.backward;
    mean.backward_input += s.backward_input;
    mean.backward_weight += s.backward_weight;
    if (s.overlap > 0) {
      mean.overlap += s.overlap;
      ++with_overlap;
    }
  }
  const auto count = static_cast<double>(stages.size());
  mean.forward /= count;
  mean.backward /= count;
  mean.backward_input /= count;
  mean.backward_weight /= count;
  if (with_overlap > 0) mean.overlap /= with_overlap;
  return mean;
}

// A backward may free less than its microbatch allocated (what it leaves for later, e.g. the
// gradient it sends), and not more, but for allocator noise: more than 25% above is not a
// measurement of this microbatch's memory.
constexpr double kFreedAboveKept = 0.25;

Status CheckFreed(double freed, double allocated, const std::string& field) {
  if (freed <= allocated * (1 + kFreedAboveKept)) return Status::Ok();
  return InvalidArgument(field + ": frees " + FormatNumber(freed) +
                         " bytes (median) but the microbatch allocated " + FormatNumber(allocated) +
                         " (memory.kept_by_forward + received_forward + received_backward); a " +
                         "backward cannot free more than its microbatch allocated");
}

// A figure's median where measured and positive, else 0.
double MedianOrZero(const DurationStats& stats) {
  return Measured(stats) ? std::max(stats.median, 0.0) : 0.0;
}

// One stage's memory in bytes. A microbatch holds, from its F until its backward, what F kept
// and the message its RECV_F allocated just before (the activation); what its backward frees
// of that and of its RECV_B's message, I then W, leaves the rest held (the gradient it passes
// back: retained). The RECV_B's message sits under the backward that reads it, which the model
// counts as part of that backward's transient. `handed_in`: the next stage's retained gradient
// where that stage is on this stage's rank; this stage's backward (B or I) frees it too, so
// its measured frees count it, and it is taken out (the model frees it there by itself:
// MemoryChangeTable).
StatusOr<StageMemory> CalibrateStageMemory(const StageMemoryProfile& memory, double handed_in) {
  if (!Measured(memory.kept_by_forward)) {
    return InvalidArgument(
        "memory.kept_by_forward: no F measured in bytes, while other stages were");
  }
  const double kept = memory.kept_by_forward.median;
  if (kept <= 0) {
    return InvalidArgument("memory.kept_by_forward.median: F keeps " + FormatNumber(kept) +
                           " bytes; a stage's activation must be > 0");
  }
  const double received_forward = MedianOrZero(memory.received_forward);
  const double received_backward = MedianOrZero(memory.received_backward);
  const double held = kept + received_forward;
  const double releasable = held + received_backward;
  StageMemory out{.activation = held,
                  .forward_transient = MedianOrZero(memory.forward_transient),
                  .backward_transient = MedianOrZero(memory.backward_transient) + received_backward,
                  .input_transient = MedianOrZero(memory.input_transient) + received_backward,
                  .weight_transient = MedianOrZero(memory.weight_transient),
                  .received_input = received_forward,
                  .received_gradient = received_backward,
                  .gradient = memory.gradient_bytes};
  double freed = 0.0;
  const bool full = Measured(memory.freed_by_backward);
  if (full) {
    freed = memory.freed_by_backward.median - handed_in;
    PIPEPLAN_RETURN_IF_ERROR(CheckFreed(freed, releasable, "memory.freed_by_backward"));
  }
  if (Measured(memory.freed_by_input) && Measured(memory.freed_by_weight)) {
    const double split = memory.freed_by_input.median + memory.freed_by_weight.median - handed_in;
    PIPEPLAN_RETURN_IF_ERROR(
        CheckFreed(split, releasable, "memory.freed_by_input + memory.freed_by_weight"));
    // Retained is B's where B was measured; a split that frees less keeps the rest too.
    if (full) {
      out.split_retained_extra = std::max(0.0, freed - split);
    } else {
      freed = split;
    }
    // An I that allocates more than it frees holds that too, until W.
    const double by_input = memory.freed_by_input.median - received_backward - handed_in;
    out.freed_by_input = std::clamp(by_input, 0.0, held);
    out.allocated_by_input = std::max(0.0, -by_input);
  }
  out.retained = std::clamp(releasable - freed, 0.0, held);
  return out;
}

// The mean of the stages' figures: a uniform memory model.
StageMemory MeanStageMemory(const std::vector<StageMemory>& stages) {
  StageMemory mean;
  const auto n = static_cast<double>(stages.size());
  for (const StageMemory& stage : stages) {
    mean.activation += stage.activation / n;
    mean.freed_by_input += stage.freed_by_input / n;
    mean.forward_transient += stage.forward_transient / n;
    mean.backward_transient += stage.backward_transient / n;
    mean.input_transient += stage.input_transient / n;
    mean.weight_transient += stage.weight_transient / n;
    mean.retained += stage.retained / n;
    mean.received_input += stage.received_input / n;
    mean.received_gradient += stage.received_gradient / n;
    mean.gradient += stage.gradient / n;
    mean.allocated_by_input += stage.allocated_by_input / n;
    mean.split_retained_extra += stage.split_retained_extra / n;
  }
  return mean;
}

// Each stage's own static bytes, its data left out: the model's inputs and the loss's targets
// belong to a chain's first and last stage wherever a plan cuts the model, not to the depth of
// the stage that held them when profiled, and they are per microbatch.
void StageStatic(const Profile& profile, MemoryModel& memory) {
  for (size_t s = 0; s < memory.stages.size(); ++s) {
    const StageMemoryProfile& measured = profile.stages[s].memory;
    memory.stages[s].static_bytes =
        std::max(0.0, measured.static_bytes - measured.input_bytes - measured.target_bytes);
    if (measured.microbatches <= 0) continue;  // no data (ValidateProfile)
    const double microbatches = measured.microbatches;
    memory.first_stage_data_per_microbatch =
        std::max(memory.first_stage_data_per_microbatch, measured.input_bytes / microbatches);
    memory.last_stage_data_per_microbatch =
        std::max(memory.last_stage_data_per_microbatch, measured.target_bytes / microbatches);
  }
}

// A uniform model's static memory: one stage's the mean of the stages between the first and the
// last (with two or fewer, the smaller of the ends'), the ends' surplus over it their extras.
// `stages` are the per-stage figures (StageStatic), the data left out.
void UniformStatic(const std::vector<StageMemory>& stages, MemoryModel& memory) {
  const double first = stages.front().static_bytes;
  const double last = stages.back().static_bytes;
  double share = std::min(first, last);
  if (stages.size() > 2) {
    share = 0.0;
    for (size_t s = 1; s + 1 < stages.size(); ++s) share += stages[s].static_bytes;
    share /= static_cast<double>(stages.size() - 2);
  }
  for (StageMemory& stage : memory.stages) stage.static_bytes = share;
  if (stages.size() == 1) return;
  memory.first_stage_static = std::max(0.0, first - share);
  memory.last_stage_static = std::max(0.0, last - share);
}

// Per rank what the profile says stays with the rank: all its static memory, or where the
// stages' own were told, the rest.
void RankStatic(const std::vector<double>& bytes, MemoryModel& memory) {
  for (const double b : bytes) memory.static_per_rank = std::max(memory.static_per_rank, b);
  const bool ranks_differ =
      std::any_of(bytes.begin(), bytes.end(), [&](double b) { return b != bytes.front(); });
  if (ranks_differ) memory.static_by_rank = bytes;
}

// The memory model in bytes where the profile counted them: per stage what a microbatch holds
// and I frees, the transients and the stage's own static memory; per rank the rest of the
// static memory where ranks differ (static_per_rank is the largest).
StatusOr<std::optional<MemoryModel>> CalibrateMemory(const Profile& profile, bool uniform) {
  bool any = !profile.static_bytes.empty();
  for (const StageProfile& stage : profile.stages)
    any = any || Measured(stage.memory.kept_by_forward);
  if (!any) return std::optional<MemoryModel>();
  MemoryModel memory;
  memory.unit = MemoryUnit::kBytes;
  // Last stage first: a stage's backward frees the gradient the next one handed it on the
  // same rank, which that stage's figures tell.
  memory.stages.assign(profile.stages.size(), StageMemory{});
  for (size_t s = profile.stages.size(); s-- > 0;) {
    const bool hands_in = s < profile.boundaries.size() && profile.boundaries[s].same_rank;
    const double handed_in = hands_in ? memory.stages[s + 1].retained : 0.0;
    StatusOr<StageMemory> stage = CalibrateStageMemory(profile.stages[s].memory, handed_in);
    if (!stage.ok()) return stage.status().WithContext("profile stage " + std::to_string(s));
    memory.stages[s] = *stage;
  }
  const bool stages_told = !profile.own_static_bytes.empty();
  if (stages_told) StageStatic(profile, memory);
  if (uniform) {
    const std::vector<StageMemory> per_stage = std::exchange(memory.stages, {});
    memory.stages.assign(per_stage.size(), MeanStageMemory(per_stage));
    if (stages_told) UniformStatic(per_stage, memory);
  }
  RankStatic(stages_told ? profile.own_static_bytes : profile.static_bytes, memory);
  return std::optional<MemoryModel>(std::move(memory));
}

FigureSource SourceOf(int origin) {
  if (origin < 0) return {.origin = FigureOrigin::kAssumed};
  return {.origin = FigureOrigin::kMeasured, .run = origin};
}

// Per stage what was measured, and in which run; the rest CalibrateStage derived.
std::vector<StageSources> SourcesOf(const std::vector<StageOrigins>& origins) {
  std::vector<StageSources> sources;
  sources.reserve(origins.size());
  for (const StageOrigins& stage : origins) {
    sources.push_back({.forward = SourceOf(stage.forward),
                       .backward = SourceOf(stage.backward),
                       .backward_input = SourceOf(stage.split),
                       .backward_weight = SourceOf(stage.split),
                       .overlap = SourceOf(stage.overlap)});
  }
  return sources;
}

// Means over the stages: a kind is as measured as its least measured stage.
std::vector<StageSources> Uniform(const std::vector<StageSources>& sources) {
  const size_t stages = sources.size();
  const std::vector<StageSources> one = CollapseSources(sources, 1);
  return std::vector<StageSources>(stages, one.front());
}

}  // namespace

std::string_view TimeUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return "s";
    case TimeUnit::kMilliseconds:
      return "ms";
    case TimeUnit::kMicroseconds:
      return "us";
    case TimeUnit::kNanoseconds:
      return "ns";
  }
  return "?";
}

std::optional<TimeUnit> TimeUnitFromName(std::string_view name) {
  for (const TimeUnit unit : {TimeUnit::kSeconds, TimeUnit::kMilliseconds, TimeUnit::kMicroseconds,
                              TimeUnit::kNanoseconds}) {
    if (TimeUnitName(unit) == name) return unit;
  }
  return std::nullopt;
}

double SecondsPer(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kSeconds:
      return 1.0;
    case TimeUnit::kMilliseconds:
      return 1e-3;
    case TimeUnit::kMicroseconds:
      return 1e-6;
    case TimeUnit::kNanoseconds:
      return 1e-9;
  }
  return 1.0;
}

StatusOr<CostModel> Calibrate(const Profile& profile, const CalibrateOptions& options) {
  return Calibrate(std::vector<Profile>{profile}, options);
}

StatusOr<CostModel> Calibrate(const std::vector<Profile>& profiles,
                              const CalibrateOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const MergedProfile merged, MergeProfiles(profiles));
  return Calibrate(merged, options);
}

StatusOr<CostModel> Calibrate(const MergedProfile& merged, const CalibrateOptions& options) {
  if (!std::isfinite(options.input_share) || options.input_share < 0 || options.input_share > 1) {
    return InvalidArgument("the input share of B must be in [0, 1], got " +
                           FormatNumber(options.input_share));
  }
  const Profile& profile = merged.profile;
  const double seconds_per_unit = SecondsPer(options.unit);

  std::vector<StageCosts> stages;
  for (size_t s = 0; s < profile.stages.size(); ++s) {
    StatusOr<StageCosts> costs =
        CalibrateStage(profile.stages[s], seconds_per_unit, options.input_share);
    if (!costs.ok()) return costs.status().WithContext("profile stage " + std::to_string(s));
    stages.push_back(*costs);
  }

  std::vector<std::optional<BoundaryCosts>> boundaries;
  std::vector<BoundaryCosts> measured;
  std::vector<std::optional<double>> overheads;
  std::vector<double> measured_overheads;
  for (const BoundaryProfile& boundary : profile.boundaries) {
    boundaries.push_back(CalibrateBoundary(boundary, seconds_per_unit));
    if (boundaries.back()) measured.push_back(*boundaries.back());
    overheads.push_back(CalibrateReceiveOverhead(boundary, seconds_per_unit));
    if (overheads.back()) measured_overheads.push_back(*overheads.back());
  }
  BoundaryCosts mean_boundary = MeanBoundary(measured);
  mean_boundary.receive_overhead = MeanOf(measured_overheads);

  CostModel costs;
  costs.time_unit = std::string(TimeUnitName(options.unit));
  if (options.uniform) {
    // The means in every stage's entry: the file keeps the model's depth, so a plan of another
    // cut gets them cut again (FitStageFigures) as it would the per-stage figures.
    costs.stages.assign(stages.size(), MeanStage(stages));
    costs.boundaries.assign(std::max<size_t>(1, stages.size() - 1), mean_boundary);
  } else {
    costs.stages = std::move(stages);
    if (!boundaries.empty()) {
      costs.boundaries.clear();
      for (size_t b = 0; b < boundaries.size(); ++b) {
        BoundaryCosts& calibrated =
            costs.boundaries.emplace_back(boundaries[b].value_or(mean_boundary));
        calibrated.receive_overhead = overheads[b].value_or(mean_boundary.receive_overhead);
      }
    }
  }
  PIPEPLAN_ASSIGN_OR_RETURN(costs.memory, CalibrateMemory(profile, options.uniform));
  costs.runs = merged.runs;
  costs.sources = SourcesOf(merged.origins);
  if (options.uniform) costs.sources = Uniform(costs.sources);
  // The entries say which stages they are: a dual placement's two copies, or one chain.
  costs.chains = profile.chains;
  if (costs.memory.has_value()) costs.memory->chains = profile.chains;
  const int num_stages = static_cast<int>(profile.stages.size());
  PIPEPLAN_RETURN_IF_ERROR(
      ValidateCostModel(costs, num_stages).WithContext("calibrated cost model"));
  return costs;
}

}  // namespace pipeplan
