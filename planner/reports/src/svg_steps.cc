#include "pipeplan/reports/svg_steps.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pipeplan {
namespace {

void Renumber(int step, int microbatches, Action& action) {
  action.microbatch = MicrobatchId{step * microbatches + action.microbatch.value};
  for (Action& sub : action.sub_actions) Renumber(step, microbatches, sub);
}

Status CheckShapes(const Plan& plan, std::span<const Timeline> steps,
                   std::span<const double> offsets) {
  if (steps.empty() || steps.size() != offsets.size()) {
    return InvalidArgument("consecutive steps: " + std::to_string(steps.size()) + " steps and " +
                           std::to_string(offsets.size()) + " offsets");
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].ranks.size() != plan.programs.size()) {
      return InvalidArgument("consecutive steps: step " + std::to_string(k) + " has " +
                             std::to_string(steps[k].ranks.size()) + " ranks, the plan " +
                             std::to_string(plan.programs.size()));
    }
    for (size_t r = 0; r < plan.programs.size(); ++r) {
      if (steps[k].ranks[r].actions.size() != plan.programs[r].actions.size()) {
        return InvalidArgument(
            "consecutive steps: step " + std::to_string(k) + ", rank " + std::to_string(r) +
            " times " + std::to_string(steps[k].ranks[r].actions.size()) +
            " actions of the plan's " + std::to_string(plan.programs[r].actions.size()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::pair<Plan, Timeline>> ConsecutiveSteps(const Plan& plan,
                                                     std::span<const Timeline> steps,
                                                     std::span<const double> offsets) {
  PIPEPLAN_RETURN_IF_ERROR(CheckShapes(plan, steps, offsets));
  const int microbatches = plan.request.topology.microbatches;
  Plan all = plan;
  all.request.topology.microbatches = microbatches * static_cast<int>(steps.size());
  Timeline joined;
  joined.source = steps.front().source;
  joined.ranks.resize(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    std::vector<Action>& actions = all.programs[r].actions;
    actions.clear();
    RankTimeline& rank = joined.ranks[r];
    rank.rank = steps.front().ranks[r].rank;
    rank.clock = steps.front().ranks[r].clock;
    for (size_t k = 0; k < steps.size(); ++k) {
      const RankTimeline& step = steps[k].ranks[r];
      const size_t before = actions.size();
      for (Action action : plan.programs[r].actions) {
        Renumber(static_cast<int>(k), microbatches, action);
        actions.push_back(std::move(action));
      }
      for (ActionTiming timing : step.actions) {
        timing.start += offsets[k];
        timing.end += offsets[k];
        rank.actions.push_back(timing);
      }
      for (DiscardedRun run : step.discarded) {
        run.action_index += before;
        run.timing.start += offsets[k];
        run.timing.end += offsets[k];
        rank.discarded.push_back(run);
      }
      rank.busy += step.busy;
    }
    for (const ActionTiming& timing : rank.actions) {
      joined.metrics.makespan = std::max(joined.metrics.makespan, timing.end);
    }
  }
  return std::pair{std::move(all), std::move(joined)};
}

StatusOr<std::string> RenderSvgSteps(const Plan& plan, std::span<const Timeline> steps,
                                     std::span<const double> offsets, const SvgOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(auto joined, ConsecutiveSteps(plan, steps, offsets));
  return RenderSvgTimeline(joined.first, joined.second, options);
}

StatusOr<std::string> RenderMeasuredStepsSvg(const Plan& plan, std::span<const Timeline> steps,
                                             std::span<const double> starts,
                                             const MeasuredSteps& run) {
  constexpr size_t kDrawn = 3;
  const size_t drawn = std::min(kDrawn, steps.size());
  const bool back_to_back = starts.empty();
  if (!back_to_back && starts.size() < drawn) {
    return InvalidArgument("measured steps: " + std::to_string(steps.size()) + " steps and " +
                           std::to_string(starts.size()) + " starts");
  }
  std::vector<double> offsets;
  for (size_t k = 0; k < drawn; ++k) {
    if (back_to_back) {
      offsets.push_back(k == 0 ? 0.0 : offsets[k - 1] + steps[k - 1].metrics.makespan);
    } else {
      offsets.push_back(starts[k] - starts[0]);
    }
  }
  SvgOptions svg;
  svg.title =
      run.name + ": measured steps " + std::to_string(run.first_step) + " to " +
      std::to_string(run.first_step + static_cast<int>(drawn) - 1) +
      (run.step_barrier ? ", each opened by the step barrier" : ", no step barrier") +
      (back_to_back ? ", drawn back to back (each step timed from the barrier that opened it)"
                    : "") +
      " (step k's microbatch m is labelled kM + m)";
  return RenderSvgSteps(plan, steps.first(drawn), offsets, svg);
}

}  // namespace pipeplan
