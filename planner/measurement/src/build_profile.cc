#include "pipeplan/measurement/build_profile.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "pipeplan/checks/validator.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/passes/transfer_links.h"

namespace pipeplan {
namespace {

// Durations of one stage by compute kind, in seconds, gathered over every step.
struct StageSamples {
  std::vector<double> forward;
  std::vector<double> backward;
  std::vector<double> backward_input;
  std::vector<double> backward_weight;
  std::vector<double> overlap;
  // Bytes, from timelines that counted them.
  std::vector<double> kept_by_forward;
  std::vector<double> freed_by_backward;
  std::vector<double> freed_by_input;
  std::vector<double> freed_by_weight;
  std::vector<double> forward_transient;
  std::vector<double> backward_transient;
  std::vector<double> input_transient;
  std::vector<double> weight_transient;
  std::vector<double> received_forward;
  std::vector<double> received_backward;
  std::vector<double> gradient_bytes;  // what the runtime told, per step
  std::vector<double> static_bytes;    // what the runtime told the stage holds, per step
  std::vector<double> input_bytes;     // of them, the model's inputs
  std::vector<double> target_bytes;    // and the loss's targets
};

// A rank's timeline counted bytes for every action.
bool HasBytes(const RankTimeline& rank) {
  return rank.memory_unit == MemoryUnit::kBytes && rank.action_memory.size() == rank.actions.size();
}

// Where an action's samples go: its duration (null for actions that are not compute), its
// memory change (null for overlap cells, whose halves are not told apart, and for sends) and
// transient (null where not compute), and the change's sign (+1: F keeps end - start, a
// receive allocates it; -1: B, I, W free start - end).
struct KindSamples {
  std::vector<double>* duration = nullptr;
  std::vector<double>* change = nullptr;
  std::vector<double>* transient = nullptr;
  double sign = 1.0;
};
KindSamples SamplesOf(StageSamples& s, ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return {&s.forward, &s.kept_by_forward, &s.forward_transient, 1.0};
    case ActionKind::kBackward:
      return {&s.backward, &s.freed_by_backward, &s.backward_transient, -1.0};
    case ActionKind::kBackwardInput:
      return {&s.backward_input, &s.freed_by_input, &s.input_transient, -1.0};
    case ActionKind::kBackwardWeight:
      return {&s.backward_weight, &s.freed_by_weight, &s.weight_transient, -1.0};
    case ActionKind::kOverlapFB:
      return {.duration = &s.overlap};
    case ActionKind::kRecvForward:
      return {.change = &s.received_forward};
    case ActionKind::kRecvBackward:
      return {.change = &s.received_backward};
    case ActionKind::kSendForward:
    case ActionKind::kSendBackward:
    case ActionKind::kPostValidation:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return {};
  }
  return {};
}

// A receive posted after its send started: how long after, and how long it then took.
struct LateReceive {
  double after_send = 0.0;
  double duration = 0.0;
};

struct BoundarySamples {
  std::vector<double> transfers;
  std::vector<LateReceive> late;

  // The durations of the late receives whose data had landed when they were posted (at
  // least the median clean transfer after their send started). Without a clean transfer
  // nothing says when data lands, so none counts.
  std::vector<double> ReceiveOverheads(const DurationStats& transfer) const {
    std::vector<double> out;
    if (transfer.samples == 0) return out;
    for (const LateReceive& r : late) {
      if (r.after_send >= transfer.median) out.push_back(r.duration);
    }
    return out;
  }
};

std::string TimelineName(const ProfileOptions& options, size_t step) {
  if (step < options.step_names.size()) return options.step_names[step];
  return "timeline " + std::to_string(step);
}

// The timeline must have one rank per program, in rank order, each with one timing per action.
Status CheckShape(const Plan& plan, const Timeline& timeline) {
  if (timeline.ranks.size() != plan.programs.size()) {
    return InvalidArgument(std::to_string(timeline.ranks.size()) +
                           " rank timelines for the plan's " +
                           std::to_string(plan.programs.size()) + " ranks");
  }
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    const RankTimeline& rank = timeline.ranks[r];
    if (rank.rank.value != static_cast<int>(r)) {
      return InvalidArgument("ranks[" + std::to_string(r) + "] is rank " +
                             std::to_string(rank.rank.value) + "; ranks must be listed in order");
    }
    const size_t expected = plan.programs[r].actions.size();
    if (rank.actions.size() != expected) {
      return InvalidArgument("rank " + std::to_string(r) + ": " +
                             std::to_string(rank.actions.size()) + " action timings for its " +
                             std::to_string(expected) + " actions");
    }
  }
  return Status::Ok();
}

// Every action's times are finite and it does not end before it starts.
Status CheckTimes(const Plan& plan, const Timeline& timeline) {
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionTiming& t = timeline.ranks[r].actions[i];
      const auto where = [&] { return Where(static_cast<int>(r), i, actions[i]); };
      if (!std::isfinite(t.start) || !std::isfinite(t.end)) {
        return InvalidArgument(where() + ": times must be finite, got start " +
                               FormatNumber(t.start) + ", end " + FormatNumber(t.end));
      }
      if (t.end < t.start) {
        return InvalidArgument(where() + ": ends before it starts (start " + FormatNumber(t.start) +
                               ", end " + FormatNumber(t.end) + ")");
      }
      if (!HasBytes(timeline.ranks[r])) continue;
      const ActionMemory& m = timeline.ranks[r].action_memory[i];
      if (!std::isfinite(m.start) || !std::isfinite(m.end) || !std::isfinite(m.peak) ||
          m.start < 0 || m.end < 0 || m.peak < std::max(m.start, m.end)) {
        return InvalidArgument(where() + ": memory must be finite bytes >= 0 with the peak at " +
                               "least its start and end, got start " + FormatNumber(m.start) +
                               ", end " + FormatNumber(m.end) + ", peak " + FormatNumber(m.peak));
      }
    }
  }
  return Status::Ok();
}

// Per rank and action: whether it is a receive whose gradient an F&B cell's backward half
// uses (the cell runs its halves in turn and waits for it in between).
std::vector<std::vector<bool>> ReceivesFeedingSecondHalves(const Plan& plan) {
  std::vector<std::vector<bool>> feeds;
  for (const RankProgram& program : plan.programs) {
    std::set<std::pair<int, int>> second_halves;  // (stage, microbatch)
    for (const Action& a : program.actions) {
      if (a.kind == ActionKind::kOverlapFB && a.sub_actions.size() == 2) {
        second_halves.emplace(a.sub_actions[1].stage.value, a.sub_actions[1].microbatch.value);
      }
    }
    std::vector<bool>& mine = feeds.emplace_back(program.actions.size(), false);
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const Action& a = program.actions[i];
      mine[i] = a.kind == ActionKind::kRecvBackward &&
                second_halves.contains({a.stage.value, a.microbatch.value});
    }
  }
  return feeds;
}

class ProfileBuilder {
 public:
  ProfileBuilder(const Plan& plan, double seconds_per_unit)
      : plan_(plan),
        seconds_per_unit_(seconds_per_unit),
        links_(plan.programs),
        stages_(static_cast<size_t>(plan.request.topology.num_stages())),
        boundaries_(stages_.size() - 1),
        feeds_second_half_(ReceivesFeedingSecondHalves(plan)) {}

  Status AddStep(const Timeline& timeline) {
    PIPEPLAN_RETURN_IF_ERROR(CheckShape(plan_, timeline));
    PIPEPLAN_RETURN_IF_ERROR(CheckTimes(plan_, timeline));
    AddCompute(timeline);
    PIPEPLAN_RETURN_IF_ERROR(AddStatic(timeline));
    return AddTransfers(timeline);
  }

  Profile Finish(int steps, std::string source) && {
    Profile profile;
    profile.source = std::move(source);
    profile.steps = steps;
    const StageMap map(plan_.request.topology);
    for (size_t i = 0; i < stages_.size(); ++i) {
      StageSamples& s = stages_[i];
      profile.stages.push_back(
          {.forward = SummarizeDurations(std::move(s.forward)),
           .backward = SummarizeDurations(std::move(s.backward)),
           .backward_input = SummarizeDurations(std::move(s.backward_input)),
           .backward_weight = SummarizeDurations(std::move(s.backward_weight)),
           .overlap = SummarizeDurations(std::move(s.overlap)),
           .memory = SummarizeMemory(s, map.MicrobatchesOf(StageId(static_cast<int>(i))))});
    }
    for (std::vector<double>& bytes : static_bytes_) {
      if (!bytes.empty()) profile.static_bytes.push_back(SummarizeDurations(bytes).median);
    }
    if (profile.static_bytes.size() != static_bytes_.size()) profile.static_bytes.clear();
    for (std::vector<double>& bytes : own_static_bytes_) {
      if (!bytes.empty()) profile.own_static_bytes.push_back(SummarizeDurations(bytes).median);
    }
    if (profile.own_static_bytes.size() != profile.static_bytes.size()) {
      profile.own_static_bytes.clear();
    }
    for (size_t s = 0; s < boundaries_.size(); ++s) {
      BoundarySamples& b = boundaries_[s];
      const DurationStats transfer = SummarizeDurations(std::move(b.transfers));
      const auto stage = static_cast<int>(s);
      profile.boundaries.push_back(
          {.transfer = transfer,
           .late_receives = static_cast<int>(b.late.size()),
           .receive_overhead = SummarizeDurations(b.ReceiveOverheads(transfer)),
           // Dual placement's two copies meet on one rank, but nothing passes between them.
           .same_rank = !map.IsLast(StageId(stage)) &&
                        map.RankOf(StageId(stage)) == map.RankOf(StageId(stage + 1))});
    }
    if (plan_.request.topology.placement == Placement::kDual) profile.chains = 2;
    const Topology& t = plan_.request.topology;
    profile.plan = plan_.request.strategy + " P=" + std::to_string(t.ranks) +
                   " V=" + std::to_string(t.stages_per_rank) +
                   " M=" + std::to_string(t.microbatches);
    return profile;
  }

 private:
  void AddCompute(const Timeline& timeline) {
    for (size_t r = 0; r < plan_.programs.size(); ++r) {
      const std::vector<Action>& actions = plan_.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& action = actions[i];
        // A validated overlap cell is {F, B or I}: it counts for its forward half's stage.
        const StageId stage =
            action.kind == ActionKind::kOverlapFB ? action.sub_actions[0].stage : action.stage;
        const KindSamples samples =
            SamplesOf(stages_[static_cast<size_t>(stage.value)], action.kind);
        if (samples.duration != nullptr) {
          const ActionTiming& t = timeline.ranks[r].actions[i];
          samples.duration->push_back((t.end - t.start) * seconds_per_unit_);
        }
        if (samples.change == nullptr || !HasBytes(timeline.ranks[r])) continue;
        const ActionMemory& m = timeline.ranks[r].action_memory[i];
        samples.change->push_back(samples.sign * (m.end - m.start));
        if (samples.transient != nullptr) {
          samples.transient->push_back(m.peak - std::max(m.start, m.end));
        }
      }
    }
  }

  // What each rank held when its first compute began (the measured timeline's peak less its
  // peak above that start) and, where the runtime told them, what each of its stages holds and
  // what is left to the rank itself.
  Status AddStatic(const Timeline& timeline) {
    static_bytes_.resize(timeline.ranks.size());
    own_static_bytes_.resize(timeline.ranks.size());
    const StageMap map(plan_.request.topology);
    for (size_t r = 0; r < timeline.ranks.size(); ++r) {
      const RankTimeline& rank = timeline.ranks[r];
      if (!HasBytes(rank)) continue;
      const double held = rank.peak_memory - rank.peak_activation_memory;
      static_bytes_[r].push_back(held);
      if (rank.stage_static.empty()) continue;
      double stages_hold = 0.0;
      for (const StageStatic& stage : rank.stage_static) {
        if (stage.stage.value < 0 || stage.stage.value >= map.num_stages() ||
            map.RankOf(stage.stage).value != static_cast<int>(r)) {
          return InvalidArgument("rank " + std::to_string(r) + ": stage_static names stage " +
                                 std::to_string(stage.stage.value) +
                                 ", which the plan does not place on this rank");
        }
        StageSamples& samples = stages_[static_cast<size_t>(stage.stage.value)];
        samples.static_bytes.push_back(stage.bytes);
        samples.input_bytes.push_back(stage.input_bytes);
        samples.target_bytes.push_back(stage.target_bytes);
        samples.gradient_bytes.push_back(stage.gradient_bytes);
        stages_hold += stage.bytes;
      }
      // Allocator rounding may make the stages' own figures a little above what was counted.
      own_static_bytes_[r].push_back(std::max(0.0, held - stages_hold));
    }
    return Status::Ok();
  }

  // `microbatches`: the stage's per step, which its data are for (kept where it told them).
  static StageMemoryProfile SummarizeMemory(StageSamples& s, int microbatches) {
    const auto median = [](std::vector<double>& bytes) {
      return bytes.empty() ? 0.0 : SummarizeDurations(bytes).median;
    };
    // The data are a part of the static bytes, median for median (they do not change).
    const double static_bytes = median(s.static_bytes);
    const double inputs = std::min(median(s.input_bytes), static_bytes);
    const double targets = std::min(median(s.target_bytes), static_bytes - inputs);
    return {.kept_by_forward = SummarizeDurations(std::move(s.kept_by_forward)),
            .freed_by_backward = SummarizeDurations(std::move(s.freed_by_backward)),
            .freed_by_input = SummarizeDurations(std::move(s.freed_by_input)),
            .freed_by_weight = SummarizeDurations(std::move(s.freed_by_weight)),
            .forward_transient = SummarizeDurations(std::move(s.forward_transient)),
            .backward_transient = SummarizeDurations(std::move(s.backward_transient)),
            .input_transient = SummarizeDurations(std::move(s.input_transient)),
            .weight_transient = SummarizeDurations(std::move(s.weight_transient)),
            .received_forward = SummarizeDurations(std::move(s.received_forward)),
            .received_backward = SummarizeDurations(std::move(s.received_backward)),
            .static_bytes = static_bytes,
            .input_bytes = inputs,
            .target_bytes = targets,
            .gradient_bytes = median(s.gradient_bytes),
            .microbatches = s.static_bytes.empty() ? 0 : microbatches};
  }

  // Pairs every send with its receive as the transport does (k-th send on a link with the
  // k-th receive on it; the validated plan guarantees they are the same message).
  Status AddTransfers(const Timeline& timeline) {
    const int ranks = static_cast<int>(plan_.programs.size());
    for (int sender = 0; sender < ranks; ++sender) {
      for (const TransferLinks::Link& link : links_.SendLinks(sender)) {
        const TransferLinks::Link* incoming = links_.FindReceiveLink(link.peer, sender);
        if (incoming == nullptr) continue;  // cannot happen: the plan was validated
        const auto sends = links_.Refs(link);
        const auto receives = links_.Refs(*incoming);
        for (size_t k = 0; k < sends.size() && k < receives.size(); ++k) {
          PIPEPLAN_RETURN_IF_ERROR(AddTransfer(timeline, sends[k], receives[k]));
        }
      }
    }
    return Status::Ok();
  }

  Status AddTransfer(const Timeline& timeline, const TransferRef& send_ref,
                     const TransferRef& recv_ref) {
    const Action& send = plan_.programs[send_ref.rank].actions[send_ref.index];
    if (send.kind == ActionKind::kSendPostValidation) return Status::Ok();
    const Action& recv = plan_.programs[recv_ref.rank].actions[recv_ref.index];
    // A host-timed trace shows such a receive landed by the cell's end, not when: no sample.
    if (timeline.ranks[recv_ref.rank].clock == OpClock::kProfilerHost &&
        feeds_second_half_[recv_ref.rank][recv_ref.index]) {
      return Status::Ok();
    }
    const ActionTiming& sent = timeline.ranks[send_ref.rank].actions[send_ref.index];
    const ActionTiming& received = timeline.ranks[recv_ref.rank].actions[recv_ref.index];
    BoundarySamples& boundary =
        boundaries_[static_cast<size_t>(std::min(send.stage.value, recv.stage.value))];
    // Aligned clocks (AlignRankClocks) make a receive end exactly at its send's start up to
    // rounding: only an end earlier by more than that is a real inconsistency.
    const double rounding = 1e-9 * std::max(1.0, std::abs(sent.start));
    if (received.end < sent.start - rounding) {
      return InvalidArgument(
          Where(recv_ref.rank, recv_ref.index, recv) + " ends at " + FormatNumber(received.end) +
          ", before its send (" + Where(send_ref.rank, send_ref.index, send) + ") starts at " +
          FormatNumber(sent.start) + "; the ranks' times do not share one time zero");
    }
    if (received.start > sent.start) {
      boundary.late.push_back({.after_send = (received.start - sent.start) * seconds_per_unit_,
                               .duration = (received.end - received.start) * seconds_per_unit_});
    } else {
      // An end before the send's start by a rounding (allowed above) is a transfer of 0.
      boundary.transfers.push_back(std::max(0.0, received.end - sent.start) * seconds_per_unit_);
    }
    return Status::Ok();
  }

  const Plan& plan_;
  double seconds_per_unit_;
  TransferLinks links_;
  std::vector<StageSamples> stages_;
  std::vector<BoundarySamples> boundaries_;
  std::vector<std::vector<double>> static_bytes_;      // per rank, one per step that counted bytes
  std::vector<std::vector<double>> own_static_bytes_;  // per rank: less its stages' own
  std::vector<std::vector<bool>> feeds_second_half_;   // per rank and action
};

// Of sorted samples: summed in that order, so the same samples give the same bits; clamped
// to [min, max], which rounding could leave by an ulp.
double MeanOfSorted(const std::vector<double>& samples) {
  double sum = 0.0;
  for (const double x : samples) sum += x;
  return std::clamp(sum / static_cast<double>(samples.size()), samples.front(), samples.back());
}

}  // namespace

DurationStats SummarizeDurations(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  const auto quantile = [&](double q) {
    const double position = q * static_cast<double>(samples.size() - 1);
    const auto below = static_cast<size_t>(position);
    if (below + 1 >= samples.size()) return samples.back();
    const double fraction = position - static_cast<double>(below);
    return samples[below] + fraction * (samples[below + 1] - samples[below]);
  };
  return {.samples = static_cast<int>(samples.size()),
          .median = quantile(0.5),
          .min = samples.front(),
          .max = samples.back(),
          .p10 = quantile(0.1),
          .p90 = quantile(0.9),
          .mean = MeanOfSorted(samples)};
}

StatusOr<Profile> BuildProfile(const Plan& plan, std::span<const Timeline> steps,
                               const ProfileOptions& options) {
  if (!std::isfinite(options.seconds_per_unit) || options.seconds_per_unit <= 0) {
    return InvalidArgument("seconds per time unit must be a finite number > 0, got " +
                           FormatNumber(options.seconds_per_unit));
  }
  if (steps.empty()) return InvalidArgument("no measured steps to profile");
  const Status valid = ValidatePlan(plan);
  if (!valid.ok()) return valid.WithContext("the profiled plan is invalid");
  ProfileBuilder builder(plan, options.seconds_per_unit);
  for (size_t t = 0; t < steps.size(); ++t) {
    PIPEPLAN_RETURN_IF_ERROR(builder.AddStep(steps[t]).WithContext(TimelineName(options, t)));
  }
  return std::move(builder).Finish(static_cast<int>(steps.size()), options.source);
}

}  // namespace pipeplan
