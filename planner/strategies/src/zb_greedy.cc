// ZB-1p / ZB-2p (Zero Bubble, ICLR 2024): a greedy list scheduler of F, I (input grad) and W
// (weight grad) with one stage per rank under a per-rank memory limit. It times every action
// as it places it, defers W's to fill the waits for F and I inputs, and keeps the best of eight
// variants by longest stage span (docs/strategies.md, "zb").
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/model/text_format.h"
#include "strategies.h"

namespace pipeplan::strategies {
namespace {

// The planner's limit check allows the same relative slack (planner.cc, CheckMemoryLimit).
constexpr double kLimitSlack = 1e-12;

// What the scheduler needs of one stage (stage s runs on rank s), resolved once.
struct ZbStage {
  double forward = 0.0;
  double input = 0.0;
  double weight = 0.0;
  double forward_arrival = 0.0;   // transfer s-1 -> s of an activation (first stage: 0)
  double gradient_arrival = 0.0;  // transfer s+1 -> s of a gradient (last stage: 0)
  double activation = 0.0;        // added when F starts
  double freed_by_input = 0.0;    // released when I ends; W releases the rest
  double limit = 0.0;             // on static + activations of the rank
};

struct ZbProblem {
  int microbatches = 0;
  double static_memory = 0.0;
  std::vector<ZbStage> stages;
};

// The three switches of the heuristic; every combination is tried.
struct ZbChoices {
  bool allow_bubble_before_first_input = false;  // warm-up F's may end after the first I's input
  bool prioritize_input = false;  // a stage well ahead of the next one may skip its F
  bool greedy_fill = false;       // fill a small wait with one more W even within the allowance
};

// One entry of a stage's order.
struct ZbEntry {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
};

struct ZbCandidate {
  std::vector<std::vector<ZbEntry>> order;  // per stage (= per rank)
  double longest_span = 0.0;
};

// Running state of one stage while the builder places actions.
struct ZbStageState {
  int forwards = 0;  // F's placed; also the microbatch of the next F (likewise below)
  int inputs = 0;
  int weights = 0;
  double end = 0.0;          // end of the last action placed
  double first_start = 0.0;  // start of the first F
  double held = 0.0;         // activation memory held after the last action
  double bubble = 0.0;       // idle time after the first F
  std::vector<ZbEntry> order;

  bool HasPendingWeight() const { return weights < inputs; }
};

// Places F, I and W for every stage, microbatch by microbatch, timing each action as it goes.
// Run() returns false when a stage cannot make room for an F (a bug guard: the caller checks
// beforehand that every rank holds at least one microbatch's activation).
class ZbGreedyBuilder {
 public:
  ZbGreedyBuilder(const ZbProblem& problem, ZbChoices choices)
      : problem_(problem),
        choices_(choices),
        num_stages_(static_cast<int>(problem.stages.size())),
        state_(problem.stages.size()),
        forward_end_(num_stages_, problem.microbatches, 0.0),
        input_end_(num_stages_, problem.microbatches, 0.0),
        wants_forward_(problem.stages.size(), 0) {
    for (ZbStageState& stage : state_) {
      stage.order.reserve(3 * static_cast<size_t>(problem.microbatches));
    }
  }

  bool Run() {
    if (problem_.microbatches <= 0 || num_stages_ <= 0) return true;
    if (!WarmUp()) return false;
    for (int mb = 1; mb < problem_.microbatches; ++mb) {
      if (!SteadyStep(mb)) return false;
    }
    for (int s = 0; s < num_stages_; ++s) FlushWeights(s);
    return true;
  }

  ZbCandidate Take() {
    ZbCandidate candidate;
    candidate.order.reserve(state_.size());
    for (ZbStageState& stage : state_) {
      candidate.longest_span = std::max(candidate.longest_span, stage.end - stage.first_start);
      candidate.order.push_back(std::move(stage.order));
    }
    return candidate;
  }

 private:
  bool IsLast(int s) const { return s + 1 == num_stages_; }

  // Microbatch 0 through every stage, the extra warm-up F's, then I from last to first.
  bool WarmUp() {
    for (int s = 0; s < num_stages_; ++s) {
      if (!Fits(s, state_[s].held) || !Put(s, ActionKind::kForward)) return false;
    }
    const std::vector<int> extra = WarmUpExtraForwards();
    for (int s = 0; s < num_stages_; ++s) {
      for (int i = 0; i < extra[s]; ++i) {
        if (!Put(s, ActionKind::kForward)) return false;
      }
    }
    for (int s = num_stages_ - 1; s >= 0; --s) {
      if (!Put(s, ActionKind::kBackwardInput)) return false;
    }
    return true;
  }

  // From the last stage backwards: how many more F's fit in memory and in the wait for the
  // gradient of microbatch 0; then each stage gets at least one fewer than the one before it.
  std::vector<int> WarmUpExtraForwards() const {
    std::vector<int> extra(state_.size(), 0);
    const int last = num_stages_ - 1;
    double input_end = forward_end_.At(StageId(last), MicrobatchId(0)) + Spec(last).input;
    for (int s = last - 1; s >= 0; --s) {
      const ZbStage& spec = Spec(s);
      const double arrival = input_end + spec.gradient_arrival;
      double held = state_[s].held;
      double time = state_[s].end;
      while (state_[s].forwards + extra[s] < problem_.microbatches && Fits(s, held)) {
        const bool too_late = choices_.allow_bubble_before_first_input
                                  ? time + spec.forward > arrival
                                  : time >= arrival;
        if (too_late) break;
        held += spec.activation;
        time += spec.forward;
        ++extra[s];
      }
      input_end = std::max(time, arrival) + spec.input;
    }
    for (int s = 1; s < num_stages_; ++s) {
      const bool previous_done = state_[s - 1].forwards + extra[s - 1] >= problem_.microbatches;
      const int allowed = previous_done ? extra[s - 1] : extra[s - 1] - 1;
      extra[s] = std::max(0, std::min(extra[s], allowed));
    }
    return extra;
  }

  // Microbatch `mb` > 0: each stage decides on one F (first to last), then every stage runs the
  // I of `mb` (last to first).
  bool SteadyStep(int mb) {
    DecideForwards();
    for (int s = 0; s < num_stages_; ++s) {
      if (wants_forward_[s] != 0 && !PlaceForward(s)) return false;
    }
    for (int s = num_stages_ - 1; s >= 0; --s) {
      if (!PlaceInput(s, mb)) return false;
    }
    return true;
  }

  void DecideForwards() {
    for (int s = 0; s < num_stages_; ++s) {
      // The input of the F is there, or the previous stage produces it earlier in this step.
      const bool input_ready =
          s == 0 || state_[s - 1].forwards + wants_forward_[s - 1] > state_[s].forwards;
      wants_forward_[s] = input_ready && WantsForward(s) ? 1 : 0;
    }
    // A stage runs an F only if every later stage does too: F counts never grow along the
    // pipeline, so every I of this step finds its F already placed.
    for (int s = num_stages_ - 2; s >= 0; --s) {
      wants_forward_[s] = std::min(wants_forward_[s], wants_forward_[s + 1]);
    }
  }

  // With prioritize_input, a stage two or more F's ahead of the next one skips its F when the
  // F (plus the W's it needs for memory) would delay the I that the next stage is about to send.
  bool WantsForward(int s) const {
    const ZbStageState& stage = state_[s];
    if (stage.forwards >= problem_.microbatches) return false;
    if (!choices_.prioritize_input || IsLast(s)) return true;
    const ZbStageState& next = state_[s + 1];
    if (stage.forwards < next.forwards + 2) return true;
    const double gradient_arrival =
        next.end + Spec(s + 1).forward + Spec(s + 1).input + Spec(s).gradient_arrival;
    if (stage.end >= gradient_arrival) return false;
    if (stage.end + Spec(s).forward + WeightTimeToFitForward(s) <= gradient_arrival) return true;
    return gradient_arrival - stage.end > AllowedBubble(s);
  }

  // Duration of the W's a stage would run first to make room for its next F.
  double WeightTimeToFitForward(int s) const {
    const ZbStageState& stage = state_[s];
    const ZbStage& spec = Spec(s);
    double held = stage.held;
    double time = 0.0;
    for (int w = stage.weights; w < stage.inputs && !Fits(s, held); ++w) {
      held = std::max(held - (spec.activation - spec.freed_by_input), 0.0);
      time += spec.weight;
    }
    return time;
  }

  bool PlaceForward(int s) {
    if (!MakeRoomForForward(s)) return false;
    if (s > 0) FillWait(s, ActivationArrival(s));
    return Put(s, ActionKind::kForward);
  }

  bool PlaceInput(int s, int mb) {
    if (state_[s].inputs != mb) return false;
    if (!IsLast(s)) FillWait(s, GradientArrival(s));
    if (s == 0 && state_[s].forwards == problem_.microbatches) FlushWeights(s);
    return Put(s, ActionKind::kBackwardInput);
  }

  bool MakeRoomForForward(int s) {
    while (!Fits(s, state_[s].held)) {
      if (!state_[s].HasPendingWeight()) return false;
      PutWeight(s);
    }
    return true;
  }

  // W's that end before the input arrives; then one more when the remaining wait exceeds the
  // stage's allowed bubble (or, with greedy_fill, whenever some wait remains).
  void FillWait(int s, double arrival) {
    ZbStageState& stage = state_[s];
    const double weight = Spec(s).weight;
    while (stage.HasPendingWeight() && stage.end + weight <= arrival) PutWeight(s);
    if (!stage.HasPendingWeight() || stage.end >= arrival) return;
    if (choices_.greedy_fill || arrival - stage.end > AllowedBubble(s)) PutWeight(s);
  }

  void FlushWeights(int s) {
    while (state_[s].HasPendingWeight()) PutWeight(s);
  }

  // How much more idle time this stage may take before it becomes the worst stage.
  double AllowedBubble(int s) const { return max_bubble_ - state_[s].bubble; }

  // Whether one more F on stage s fits on top of `held` activation memory.
  bool Fits(int s, double held) const {
    const ZbStage& spec = Spec(s);
    return problem_.static_memory + (held + spec.activation) <= spec.limit * (1 + kLimitSlack);
  }

  // When the activation for the next F of stage s lands (0 on the first stage).
  double ActivationArrival(int s) const {
    const StageId from(s - 1);
    const MicrobatchId mb(state_[s].forwards);
    if (s == 0 || !forward_end_.Contains(from, mb)) return 0.0;
    return forward_end_.At(from, mb) + Spec(s).forward_arrival;
  }

  // When the gradient for the next I of stage s lands (0 on the last stage).
  double GradientArrival(int s) const {
    const StageId from(s + 1);
    const MicrobatchId mb(state_[s].inputs);
    if (IsLast(s) || !input_end_.Contains(from, mb)) return 0.0;
    return input_end_.At(from, mb) + Spec(s).gradient_arrival;
  }

  // Whether the remote input of the next F or I of stage s has been placed.
  bool InputPlaced(int s, ActionKind kind) const {
    const ZbStageState& stage = state_[s];
    if (kind == ActionKind::kForward) {
      return stage.forwards < problem_.microbatches &&
             (s == 0 || state_[s - 1].forwards > stage.forwards);
    }
    return stage.inputs < stage.forwards && (IsLast(s) || state_[s + 1].inputs > stage.inputs);
  }

  void PutWeight(int s) { Put(s, ActionKind::kBackwardWeight); }

  // Appends the next F, I or W of stage s, times it and updates memory and bubble.
  bool Put(int s, ActionKind kind) {
    ZbStageState& stage = state_[s];
    const ZbStage& spec = Spec(s);
    double duration = 0.0;
    double ready = stage.end;
    int mb = 0;
    switch (kind) {
      case ActionKind::kForward:
        if (!InputPlaced(s, kind)) return false;
        mb = stage.forwards;
        duration = spec.forward;
        ready = std::max(ready, ActivationArrival(s));
        break;
      case ActionKind::kBackwardInput:
        if (!InputPlaced(s, kind)) return false;
        mb = stage.inputs;
        duration = spec.input;
        ready = std::max(ready, GradientArrival(s));
        break;
      case ActionKind::kBackwardWeight:
        if (!stage.HasPendingWeight()) return false;
        mb = stage.weights;
        duration = spec.weight;
        break;
      case ActionKind::kBackward:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return false;
    }
    if (stage.forwards > 0) {
      stage.bubble += ready - stage.end;
      max_bubble_ = std::max(max_bubble_, stage.bubble);
    } else {
      stage.first_start = ready;
    }
    stage.end = ready + duration;
    stage.order.push_back({kind, mb});
    // Memory in the order the planner's tracker counts it, so both agree to the last bit.
    if (kind == ActionKind::kForward) {
      stage.held += spec.activation;
      forward_end_.At(StageId(s), MicrobatchId(mb)) = stage.end;
      ++stage.forwards;
    } else if (kind == ActionKind::kBackwardInput) {
      stage.held = std::max(stage.held - spec.freed_by_input, 0.0);
      input_end_.At(StageId(s), MicrobatchId(mb)) = stage.end;
      ++stage.inputs;
    } else {
      stage.held = std::max(stage.held - (spec.activation - spec.freed_by_input), 0.0);
      ++stage.weights;
    }
    return true;
  }

  const ZbStage& Spec(int s) const { return problem_.stages[s]; }

  const ZbProblem& problem_;
  ZbChoices choices_;
  int num_stages_;
  std::vector<ZbStageState> state_;
  StageMbTable<double> forward_end_;
  StageMbTable<double> input_end_;
  std::vector<uint8_t> wants_forward_;  // per stage, this step
  double max_bubble_ = 0.0;             // largest stage bubble so far (bubbles only grow)
};

// Resolves per-stage costs, transfers and memory. `preset_activations` (1 or 2 for ZB-1p /
// ZB-2p) gives each rank static + preset x P activations of its stage when no limit is set.
ZbProblem MakeProblem(const PlanRequest& request, const StageMap& stages, double limit_or_zero,
                      int preset_activations) {
  const int ranks = stages.num_ranks();
  const int stages_per_rank = request.topology.stages_per_rank;
  ZbProblem problem;
  problem.microbatches = request.topology.microbatches;
  problem.static_memory = request.memory.LargestFixed(stages, request.topology.microbatches);
  problem.stages.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const StageId stage = stages.StagesOf(RankId(r)).front();
    const StageCosts& costs = request.costs.Stage(stage);
    ZbStage& spec = problem.stages[r];
    spec.forward = costs.forward;
    spec.input = costs.backward_input;
    spec.weight = costs.backward_weight;
    if (r > 0) spec.forward_arrival = request.costs.TransferTime(StageId(r - 1), stage);
    if (r + 1 < ranks) spec.gradient_arrival = request.costs.TransferTime(StageId(r + 1), stage);
    spec.activation = request.memory.Activation(stage, stages_per_rank);
    spec.freed_by_input = request.memory.FreedByInput(stage, stages_per_rank);
    spec.limit = preset_activations > 0
                     ? problem.static_memory + preset_activations * ranks * spec.activation
                     : limit_or_zero;
  }
  return problem;
}

// The least limit the greedy scheduler takes: every rank must hold one microbatch's activation
// on top of its static memory. `worst_rank` needs the most.
struct LeastLimit {
  double needed = 0.0;
  int worst_rank = 0;
};
LeastLimit LeastLimitOf(const ZbProblem& problem) {
  LeastLimit least;
  for (size_t r = 0; r < problem.stages.size(); ++r) {
    const double rank_needed = problem.static_memory + problem.stages[r].activation;
    if (rank_needed > least.needed) least = {rank_needed, static_cast<int>(r)};
  }
  return least;
}

Status CheckLimitHoldsOneMicrobatch(const PlanRequest& request, const ZbProblem& problem) {
  const bool fits =
      std::all_of(problem.stages.begin(), problem.stages.end(), [&](const ZbStage& s) {
        return problem.static_memory + s.activation <= s.limit * (1 + kLimitSlack);
      });
  if (fits) return Status::Ok();
  const LeastLimit least = LeastLimitOf(problem);
  return InvalidArgument(
      request.strategy + ": memory limit " + request.memory.Describe(problem.stages.front().limit) +
      " is too small; " + request.memory.SmallestLimitPhrase(StageMap(request.topology)) +
      request.memory.Describe(least.needed) + " (" + request.memory.FixedName() + " " +
      FormatNumber(problem.static_memory) + " + one microbatch's activation " +
      FormatNumber(problem.stages[least.worst_rank].activation) + " on rank " +
      std::to_string(least.worst_rank) + ")");
}

ComputeOrder ToComputeOrder(const ZbCandidate& candidate, const StageMap& stages) {
  ComputeOrder order(candidate.order.size());
  for (size_t r = 0; r < candidate.order.size(); ++r) {
    const StageId stage = stages.StagesOf(RankId(static_cast<int>(r))).front();
    order[r].reserve(candidate.order[r].size());
    for (const ZbEntry& entry : candidate.order[r]) {
      order[r].push_back(MakeCompute(entry.kind, stage, MicrobatchId(entry.microbatch)));
    }
  }
  return order;
}

// Runs the eight variants and keeps the one with the smallest longest-stage span (the first
// of equals, so the result is deterministic).
StatusOr<ComputeOrder> ScheduleZb(const PlanRequest& request, const StageMap& stages,
                                  double limit_or_zero, int preset_activations) {
  if (stages.num_stages() != stages.num_ranks()) {
    return InvalidArgument(request.strategy + " needs one stage per rank (V=1), got V=" +
                           std::to_string(request.topology.stages_per_rank));
  }
  const ZbProblem problem = MakeProblem(request, stages, limit_or_zero, preset_activations);
  PIPEPLAN_RETURN_IF_ERROR(CheckLimitHoldsOneMicrobatch(request, problem));
  std::optional<ZbCandidate> best;
  for (const bool allow_bubble : {true, false}) {
    for (const bool prioritize_input : {true, false}) {
      for (const bool greedy_fill : {true, false}) {
        ZbGreedyBuilder builder(problem, ZbChoices{allow_bubble, prioritize_input, greedy_fill});
        if (!builder.Run()) continue;
        ZbCandidate candidate = builder.Take();
        if (!best.has_value() || candidate.longest_span < best->longest_span) {
          best = std::move(candidate);
        }
      }
    }
  }
  if (!best.has_value()) {
    return Internal(request.strategy +
                    ": the greedy scheduler found no order within the memory "
                    "limit although every rank holds one microbatch's activation");
  }
  return ToComputeOrder(*best, stages);
}

}  // namespace

// Without --memory-limit, zb plans under 1F1B's peak (P activations), like zbv: the same
// memory as the schedules it replaces.
StatusOr<ComputeOrder> GenerateZb(const PlanRequest& request, const StageMap& stages) {
  return GenerateZb1p(request, stages);
}

StatusOr<ComputeOrder> GenerateZb1p(const PlanRequest& request, const StageMap& stages) {
  if (request.memory.limit.has_value())
    return ScheduleZb(request, stages, *request.memory.limit, 0);
  return ScheduleZb(request, stages, 0.0, 1);
}

StatusOr<ComputeOrder> GenerateZb2p(const PlanRequest& request, const StageMap& stages) {
  if (request.memory.limit.has_value())
    return ScheduleZb(request, stages, *request.memory.limit, 0);
  return ScheduleZb(request, stages, 0.0, 2);
}

StatusOr<double> SmallestZbLimit(const PlanRequest& request, const StageMap& stages) {
  return LeastLimitOf(MakeProblem(request, stages, 0.0, 0)).needed;
}

}  // namespace pipeplan::strategies
