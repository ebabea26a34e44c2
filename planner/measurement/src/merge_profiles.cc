#include "pipeplan/measurement/merge_profiles.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pipeplan {
namespace {

// Takes `candidate` where it has more samples than what `kept` holds.
bool TakeIfMore(DurationStats& kept, const DurationStats& candidate) {
  if (candidate.samples <= kept.samples) return false;
  kept = candidate;
  return true;
}

void MergeMemory(StageMemoryProfile& kept, const StageMemoryProfile& other) {
  for (DurationStats StageMemoryProfile::*field :
       {&StageMemoryProfile::kept_by_forward, &StageMemoryProfile::freed_by_backward,
        &StageMemoryProfile::freed_by_input, &StageMemoryProfile::freed_by_weight,
        &StageMemoryProfile::forward_transient, &StageMemoryProfile::backward_transient,
        &StageMemoryProfile::input_transient, &StageMemoryProfile::weight_transient,
        &StageMemoryProfile::received_forward, &StageMemoryProfile::received_backward}) {
    TakeIfMore(kept.*field, other.*field);
  }
  if (kept.static_bytes == 0 && other.static_bytes > 0) {
    kept.static_bytes = other.static_bytes;
    kept.input_bytes = other.input_bytes;
    kept.target_bytes = other.target_bytes;
    kept.microbatches = other.microbatches;
  }
  kept.gradient_bytes = std::max(kept.gradient_bytes, other.gradient_bytes);
}

void MergeStage(StageProfile& kept, StageOrigins& origins, const StageProfile& other, int index) {
  if (TakeIfMore(kept.forward, other.forward)) origins.forward = index;
  if (TakeIfMore(kept.backward, other.backward)) origins.backward = index;
  if (TakeIfMore(kept.overlap, other.overlap)) origins.overlap = index;
  // I and W together: the halves of one run's split backward.
  const int other_split = other.backward_input.samples + other.backward_weight.samples;
  const int kept_split = kept.backward_input.samples + kept.backward_weight.samples;
  if (other_split > kept_split) {
    kept.backward_input = other.backward_input;
    kept.backward_weight = other.backward_weight;
    origins.split = index;
  }
  MergeMemory(kept.memory, other.memory);
}

// A boundary's transfers, late receives and receive overheads are one run's (the overheads
// are some of its late receives): the run with the most transfers measured gives them all.
void MergeBoundary(BoundaryProfile& kept, const BoundaryProfile& other, bool first) {
  const int kept_samples = kept.transfer.samples + kept.receive_overhead.samples;
  const int other_samples = other.transfer.samples + other.receive_overhead.samples;
  if (first || other_samples > kept_samples) kept = other;
}

// The distinct non-empty values, in order, joined with "; ".
std::string JoinDistinct(const std::vector<Profile>& profiles, std::string Profile::*field) {
  std::vector<std::string> seen;
  std::string joined;
  for (const Profile& profile : profiles) {
    const std::string& value = profile.*field;
    if (value.empty() || std::find(seen.begin(), seen.end(), value) != seen.end()) continue;
    seen.push_back(value);
    joined += (joined.empty() ? "" : "; ") + value;
  }
  return joined;
}

// What each profile is, for a cost file's `runs`: the plan that ran and where.
std::string RunName(const Profile& profile, size_t index) {
  std::string name = profile.plan.empty() ? "profile " + std::to_string(index) : profile.plan;
  if (!profile.source.empty()) name += ", " + profile.source;
  return name;
}

Status CheckSameCut(const Profile& first, const Profile& other, size_t index) {
  const std::string name = "profiles[" + std::to_string(index) + "]";
  if (index == 0) return Status::Ok();
  if (other.stages.size() != first.stages.size()) {
    return InvalidArgument(name + " has " + std::to_string(other.stages.size()) +
                           " stages, profiles[0] has " + std::to_string(first.stages.size()) +
                           ": profiles calibrated together must be of one cut of the model "
                           "(the same P x V; profile a zero-bubble plan of the same V, e.g. "
                           "zb-h1 beside 1f1b, interleaved-zb beside interleaved-1f1b)");
  }
  if (std::max(other.chains, 1) != std::max(first.chains, 1)) {
    return InvalidArgument(name + " is of " + std::to_string(std::max(other.chains, 1)) +
                           " model copies, profiles[0] of " +
                           std::to_string(std::max(first.chains, 1)) +
                           ": profiles calibrated together must be of one placement kind");
  }
  for (size_t b = 0; b < first.boundaries.size() && b < other.boundaries.size(); ++b) {
    if (first.boundaries[b].same_rank == other.boundaries[b].same_rank) continue;
    return InvalidArgument(name + " places stages " + std::to_string(b) + " and " +
                           std::to_string(b + 1) + (other.boundaries[b].same_rank ? "" : " not") +
                           " on one rank, profiles[0]" +
                           (first.boundaries[b].same_rank ? " does" : " does not") +
                           ": profiles calibrated together must place the stages alike (loop "
                           "beside loop, V shape beside V shape)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<MergedProfile> MergeProfiles(const std::vector<Profile>& profiles) {
  if (profiles.empty()) return InvalidArgument("no profile to calibrate");
  for (size_t i = 0; i < profiles.size(); ++i) {
    const std::string name =
        profiles.size() == 1 ? std::string("profile") : "profiles[" + std::to_string(i) + "]";
    PIPEPLAN_RETURN_IF_ERROR(ValidateProfile(profiles[i]).WithContext(name));
    PIPEPLAN_RETURN_IF_ERROR(CheckSameCut(profiles.front(), profiles[i], i));
  }
  MergedProfile merged;
  Profile& out = merged.profile;
  out.chains = profiles.front().chains;
  out.stages.assign(profiles.front().stages.size(), StageProfile{});
  out.boundaries.assign(profiles.front().boundaries.size(), BoundaryProfile{});
  merged.origins.assign(out.stages.size(), StageOrigins{});
  for (size_t i = 0; i < profiles.size(); ++i) {
    const Profile& profile = profiles[i];
    const int index = static_cast<int>(i);
    for (size_t s = 0; s < out.stages.size(); ++s) {
      MergeStage(out.stages[s], merged.origins[s], profile.stages[s], index);
    }
    for (size_t b = 0; b < out.boundaries.size(); ++b) {
      MergeBoundary(out.boundaries[b], profile.boundaries[b], i == 0);
    }
    if (out.static_bytes.empty()) {
      out.static_bytes = profile.static_bytes;
      out.own_static_bytes = profile.own_static_bytes;
    }
    out.steps += profile.steps;
    merged.runs.push_back(RunName(profile, i));
  }
  out.source = JoinDistinct(profiles, &Profile::source);
  out.plan = JoinDistinct(profiles, &Profile::plan);
  PIPEPLAN_RETURN_IF_ERROR(ValidateProfile(out).WithContext("merged profile"));
  return merged;
}

}  // namespace pipeplan
