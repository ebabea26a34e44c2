// The simulator's times, re-derived here independently of it: for random plans of every
// strategy under random non-uniform costs, latencies and receive overheads, every compute
// action starts at the later of its rank's previous compute end and the moment each input is
// there (a local producer's end; a remote one's end plus the transfer, and at least the
// boundary's receive overhead after the rank's previous compute end), and lasts its cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

// Random per-stage costs (B = I + W; an overlap price on odd stages, F + B on even ones) and
// per-boundary latencies and receive overheads.
CostModel RandomCosts(int num_stages, std::mt19937& random) {
  std::uniform_real_distribution<double> duration(0.5, 2.0);
  std::uniform_real_distribution<double> comm(0.0, 0.6);
  CostModel costs;
  costs.stages.clear();
  costs.boundaries.clear();
  for (int s = 0; s < num_stages; ++s) {
    const double input = duration(random);
    const double weight = duration(random);
    const double forward = duration(random);
    const double overlap = s % 2 == 0 ? 0.0 : 0.8 * (forward + input + weight);
    costs.stages.push_back({forward, input + weight, input, weight, overlap});
  }
  for (int b = 0; b + 1 < num_stages; ++b) {
    const double latency = comm(random);
    costs.boundaries.push_back({.latency = latency, .receive_overhead = comm(random)});
  }
  return costs;
}

using Key = std::tuple<ActionKind, int, int>;  // (F, or I for B and I; stage; microbatch)

// What an action's part produces for others: its forward, or its input gradient (B or I), or
// nothing they wait for (W).
std::optional<Key> Produces(const Action& part) {
  switch (part.kind) {
    case ActionKind::kForward:
      return Key{ActionKind::kForward, part.stage.value, part.microbatch.value};
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      return Key{ActionKind::kBackwardInput, part.stage.value, part.microbatch.value};
    default:
      return std::nullopt;
  }
}

// The inputs a part waits for: the previous stage's forward (F), its own forward and the next
// stage's input gradient (B, I), its own I (W).
std::vector<Key> Needs(const Action& part, const StageMap& stages) {
  const int s = part.stage.value;
  const int m = part.microbatch.value;
  std::vector<Key> needs;
  switch (part.kind) {
    case ActionKind::kForward:
      if (!stages.IsFirst(part.stage)) needs.push_back({ActionKind::kForward, s - 1, m});
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      needs.push_back({ActionKind::kForward, s, m});
      if (!stages.IsLast(part.stage)) needs.push_back({ActionKind::kBackwardInput, s + 1, m});
      break;
    case ActionKind::kBackwardWeight:
      needs.push_back({ActionKind::kBackwardInput, s, m});
      break;
    default:
      break;
  }
  return needs;
}

std::vector<Action> Parts(const Action& action) {
  if (action.sub_actions.empty()) return {action};
  return {action.sub_actions.begin(), action.sub_actions.end()};
}

struct Done {
  double end;
  int rank;
};

// Per rank, the (start, end) of each compute action in order, by repeatedly running every
// rank's next compute action whose inputs are all done.
std::vector<std::vector<ActionTiming>> Resimulate(const Plan& plan) {
  const StageMap stages(plan.request.topology);
  const CostModel& costs = plan.request.costs;
  const size_t ranks = plan.programs.size();
  std::vector<std::vector<const Action*>> computes(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    for (const Action& a : plan.programs[r].actions) {
      if (IsCompute(a.kind)) computes[r].push_back(&a);
    }
  }
  std::vector<std::vector<ActionTiming>> times(ranks);
  std::vector<double> free(ranks, 0.0);
  std::map<Key, Done> done;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      if (times[r].size() == computes[r].size()) continue;
      const Action& action = *computes[r][times[r].size()];
      double start = free[r];
      bool ready = true;
      for (const Action& part : Parts(action)) {
        for (const Key& need : Needs(part, stages)) {
          const auto producer = done.find(need);
          if (producer == done.end()) {
            ready = false;
            continue;
          }
          if (producer->second.rank == static_cast<int>(r)) {
            start = std::max(start, producer->second.end);
            continue;
          }
          const StageId from(std::get<1>(need));
          const StageId to = part.stage;
          start = std::max({start, producer->second.end + costs.TransferTime(from, to),
                            free[r] + costs.ReceiveOverhead(from, to)});
        }
      }
      if (!ready) continue;
      const double end = start + costs.ComputeTime(action);
      times[r].push_back({start, end});
      free[r] = end;
      for (const Action& part : Parts(action)) {
        if (const std::optional<Key> key = Produces(part)) {
          done[*key] = {end, static_cast<int>(r)};
        }
      }
      progress = true;
    }
  }
  return times;
}

TEST(ResimulationProperty, EveryStartIsItsRanksFreeTimeOrItsLastInputsLanding) {
  std::mt19937 random(20261126);
  int plans = 0;
  for (const Strategy& strategy : AllStrategies()) {
    for (const auto& [ranks, microbatches] : {std::pair{2, 4}, std::pair{3, 6}, std::pair{4, 8}}) {
      PlanRequest request = testing::MakeRequest(std::string(strategy.name), ranks, microbatches,
                                                 strategy.min_stages_per_rank);
      request.topology.placement = strategy.placement;
      request.costs = RandomCosts(request.topology.num_stages(), random);
      const StatusOr<Plan> plan = BuildPlan(request);
      // Some strategies refuse some shapes (dualpipe needs even M per copy, ...).
      if (!plan.ok()) continue;
      SCOPED_TRACE(std::string(strategy.name) + " P=" + std::to_string(ranks) +
                   " M=" + std::to_string(microbatches));
      const Timeline simulated = testing::SimulateOrDie(*plan);
      const std::vector<std::vector<ActionTiming>> expected = Resimulate(*plan);
      for (size_t r = 0; r < plan->programs.size(); ++r) {
        size_t compute = 0;
        for (size_t i = 0; i < plan->programs[r].actions.size(); ++i) {
          const Action& action = plan->programs[r].actions[i];
          if (!IsCompute(action.kind)) continue;
          SCOPED_TRACE(Where(static_cast<int>(r), i, action));
          ASSERT_LT(compute, expected[r].size()) << "the re-simulation got stuck";
          const ActionTiming& want = expected[r][compute++];
          const ActionTiming& have = simulated.ranks[r].actions[i];
          EXPECT_NEAR(have.start, want.start, 1e-9 * std::max(1.0, want.start));
          EXPECT_NEAR(have.end, want.end, 1e-9 * std::max(1.0, want.end));
        }
      }
      ++plans;
    }
  }
  // Every strategy plans at least one of the shapes.
  EXPECT_GE(plans, static_cast<int>(AllStrategies().size()));
}

}  // namespace
}  // namespace pipeplan
