// Helpers shared by the planner tests: requests with uniform unit costs, plan building that
// fails the test on error, and compact order strings.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/planner/make_plan.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan::testing {

// F, B, I, W per stage; comm latency on every boundary.
inline PlanRequest MakeRequest(const std::string& strategy, int ranks, int microbatches,
                               int stages_per_rank = 1, double forward = 1, double input = 1,
                               double weight = 1, double comm = 0) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  request.topology.stages_per_rank = stages_per_rank;
  request.costs.stages = {StageCosts{forward, input + weight, input, weight, 0}};
  request.costs.boundaries = {BoundaryCosts{comm, 0, 0}};
  return request;
}

// A measured duration whose every sample took `seconds`.
inline DurationStats Constant(double seconds, int samples = 4) {
  return {.samples = samples,
          .median = seconds,
          .min = seconds,
          .max = seconds,
          .p10 = seconds,
          .p90 = seconds};
}

// The plan MakePlan makes without a solver: a catalogue strategy's or auto's.
inline StatusOr<Plan> PlanOf(const PlanRequest& request) {
  StatusOr<Evaluated> made = MakePlan(request, PlanOptions{});
  if (!made.ok()) return made.status();
  return std::move(made->plan);
}

inline Plan BuildOrDie(const PlanRequest& request) {
  StatusOr<Plan> plan = PlanOf(request);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : Plan{};
}

inline Timeline SimulateOrDie(const Plan& plan) {
  StatusOr<Timeline> timeline = Simulate(plan);
  EXPECT_TRUE(timeline.ok()) << timeline.status().message();
  return timeline.ok() ? *timeline : Timeline{};
}

// Compute actions of one rank as "0F0 0F1 0B0 ...".
inline std::string ComputeString(const Plan& plan, int rank) {
  std::string out;
  for (const Action& action : plan.programs[rank].actions) {
    if (!IsCompute(action.kind)) continue;
    if (!out.empty()) out += ' ';
    out += ToString(action);
  }
  return out;
}

// The whole program of one rank, comm included.
inline std::string ProgramString(const Plan& plan, int rank) {
  std::string out;
  for (const Action& action : plan.programs[rank].actions) {
    if (!out.empty()) out += ' ';
    out += ToString(action);
  }
  return out;
}

}  // namespace pipeplan::testing
