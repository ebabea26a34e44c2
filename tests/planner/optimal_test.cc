// The solver-made strategies against what the test can know without the solver: an
// exhaustive search of every pair of rank orders on tiny pipelines, 1F1B's closed form, and
// the catalogue's heuristics. Runs OR-Tools CP-SAT through the pipeplan command's runner;
// skips, saying why, where scripts/setup_solver.sh has not installed it.
#include "pipeplan/planner/optimal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/formats/solver_files.h"
#include "pipeplan/planner/normalize.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

StatusOr<OptimalPlan> Solve(const PlanRequest& request, double time_limit_s = 60) {
  OptimalOptions options;
  options.time_limit_s = time_limit_s;
  return BuildOptimalPlan(request, options, app::RunCpSat);
}

class OptimalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const StatusOr<OptimalPlan> probe = Solve(MakeRequest("optimal", 1, 1));
    if (!probe.ok() && probe.status().message().find("setup_solver.sh") != std::string::npos) {
      GTEST_SKIP() << probe.status().message();
    }
    ASSERT_TRUE(probe.ok()) << probe.status().message();
  }
};

// ---- An exhaustive search the test does itself: P = 2, one stage per rank, F/I/W split. ----

struct TinyOp {
  char kind;  // 'F', 'I' or 'W'
  int mb;
};

// Every order of F, I and W of `microbatches` microbatches on one rank with F before I before
// W of each microbatch.
void Orders(int microbatches, std::vector<int>& done, std::vector<TinyOp>& order,
            std::vector<std::vector<TinyOp>>& out) {
  if (static_cast<int>(order.size()) == 3 * microbatches) {
    out.push_back(order);
    return;
  }
  for (int m = 0; m < microbatches; ++m) {
    if (done[m] == 3) continue;
    order.push_back({"FIW"[done[m]], m});
    ++done[m];
    Orders(microbatches, done, order, out);
    --done[m];
    order.pop_back();
  }
}

struct TinyCosts {
  double forward, input, weight, comm;
};

// The makespan of two rank orders when every op starts as soon as its rank is free and its
// inputs are there; nullopt when they wait on each other for ever.
std::optional<double> TwoRankMakespan(const std::vector<TinyOp> (&orders)[2], int microbatches,
                                      const TinyCosts& c) {
  // end[rank][kind][mb], -1 until it ran.
  std::vector<double> end(static_cast<size_t>(6) * microbatches, -1);
  auto at = [&](int rank, char kind, int mb) -> double& {
    const int k = kind == 'F' ? 0 : kind == 'I' ? 1 : 2;
    return end[(rank * 3 + k) * microbatches + mb];
  };
  size_t head[2] = {0, 0};
  double free[2] = {0, 0};
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < 2; ++r) {
      if (head[r] == orders[r].size()) continue;
      const TinyOp op = orders[r][head[r]];
      double ready = free[r];
      double duration = c.weight;
      if (op.kind == 'F') {
        duration = c.forward;
        if (r == 1) {
          if (at(0, 'F', op.mb) < 0) continue;
          ready = std::max(ready, at(0, 'F', op.mb) + c.comm);
        }
      } else if (op.kind == 'I') {
        duration = c.input;
        ready = std::max(ready, at(r, 'F', op.mb));
        if (r == 0) {
          if (at(1, 'I', op.mb) < 0) continue;
          ready = std::max(ready, at(1, 'I', op.mb) + c.comm);
        }
      } else {
        ready = std::max(ready, at(r, 'I', op.mb));
      }
      at(r, op.kind, op.mb) = ready + duration;
      free[r] = ready + duration;
      ++head[r];
      progress = true;
    }
  }
  if (head[0] != orders[0].size() || head[1] != orders[1].size()) return std::nullopt;
  return std::max(free[0], free[1]);
}

// Activations one rank holds at most: +1 when an F starts, -1 when a W ends.
int PeakActivations(const std::vector<TinyOp>& order) {
  int held = 0;
  int peak = 0;
  for (const TinyOp& op : order) {
    if (op.kind == 'F') peak = std::max(peak, ++held);
    if (op.kind == 'W') --held;
  }
  return peak;
}

// The smallest makespan over every pair of orders within `limit` activations per rank.
std::optional<double> ExhaustiveOptimum(int microbatches, const TinyCosts& costs,
                                        std::optional<int> limit) {
  std::vector<std::vector<TinyOp>> orders;
  std::vector<int> done(microbatches, 0);
  std::vector<TinyOp> order;
  Orders(microbatches, done, order, orders);
  std::vector<const std::vector<TinyOp>*> fitting;
  for (const auto& o : orders) {
    if (!limit.has_value() || PeakActivations(o) <= *limit) fitting.push_back(&o);
  }
  std::optional<double> best;
  for (const auto* first : fitting) {
    for (const auto* second : fitting) {
      const std::vector<TinyOp> pair[2] = {*first, *second};
      const std::optional<double> makespan = TwoRankMakespan(pair, microbatches, costs);
      if (makespan.has_value() && (!best.has_value() || *makespan < *best)) best = makespan;
    }
  }
  return best;
}

TEST_F(OptimalTest, EqualsAnExhaustiveSearchOnTinyPipelines) {
  const TinyCosts unit{1, 1, 1, 0};
  const TinyCosts uneven{2, 2, 1, 1};
  for (const TinyCosts& costs : {unit, uneven}) {
    for (int microbatches = 1; microbatches <= 3; ++microbatches) {
      for (const std::optional<int> limit :
           {std::optional<int>(), std::optional<int>(1), std::optional<int>(2)}) {
        SCOPED_TRACE("F=" + std::to_string(costs.forward) + " comm=" + std::to_string(costs.comm) +
                     " M=" + std::to_string(microbatches) +
                     " limit=" + (limit ? std::to_string(*limit) : "none"));
        PlanRequest request = MakeRequest("optimal", 2, microbatches, 1, costs.forward, costs.input,
                                          costs.weight, costs.comm);
        if (limit.has_value()) request.memory.limit = *limit;
        const std::optional<double> expected = ExhaustiveOptimum(microbatches, costs, limit);
        ASSERT_TRUE(expected.has_value());  // one activation per rank always fits
        const StatusOr<OptimalPlan> solved = Solve(request);
        ASSERT_TRUE(solved.ok()) << solved.status().message();
        EXPECT_DOUBLE_EQ(solved->timeline.metrics.makespan, *expected);
        EXPECT_EQ(solved->plan.provenance.solver_status, "optimal");
        EXPECT_DOUBLE_EQ(solved->plan.provenance.proven_bound, *expected);
      }
    }
  }
}

// With B whole and 1F1B's memory (P activations on every rank), nothing beats 1F1B:
// (M + P - 1)(F + B).
TEST_F(OptimalTest, UnsplitBackwardUnderOneFOneBMemoryMeetsTheClosedForm) {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    for (const int microbatches : {ranks, 2 * ranks}) {
      PlanRequest request = MakeRequest("optimal-fb", ranks, microbatches, 1, 1, 1, 1);
      request.memory.limit = ranks;
      const StatusOr<OptimalPlan> solved = Solve(request);
      ASSERT_TRUE(solved.ok()) << solved.status().message();
      EXPECT_DOUBLE_EQ(solved->timeline.metrics.makespan, (microbatches + ranks - 1) * 3.0)
          << "P=" << ranks << " M=" << microbatches;
      EXPECT_EQ(solved->plan.provenance.solver_status, "optimal");
      for (const RankProgram& program : solved->plan.programs) {
        for (const Action& action : program.actions) {
          EXPECT_NE(action.kind, ActionKind::kBackwardInput);
          EXPECT_NE(action.kind, ActionKind::kBackwardWeight);
        }
      }
    }
  }
}

// On a grid of small requests: proven optimal within the time limit, never slower than the
// best heuristic of the same placement, and the simulated makespan is the proven bound. Not
// proven in 60 deterministic seconds with one CP-SAT worker (an open item): the paper's costs
// at V = 2 under 1F1B's memory (0.3-3% above the bound) and at V = 2, P >= 3 without a limit
// (0.2-0.3%); those are held to the heuristics only.
struct GridCosts {
  const char* name;
  double forward, input, weight, comm;
};

void CheckGrid(const GridCosts& costs) {
  {
    for (int ranks = 2; ranks <= 4; ++ranks) {
      for (const int stages_per_rank : {1, 2}) {
        for (const int microbatches : {ranks, 2 * ranks}) {
          for (const bool limited : {false, true}) {
            std::vector<std::string> strategies = {"optimal"};
            if (stages_per_rank == 2) strategies.emplace_back("optimal-v");
            for (const std::string& strategy : strategies) {
              SCOPED_TRACE(strategy + " " + costs.name + " P=" + std::to_string(ranks) + " V=" +
                           std::to_string(stages_per_rank) + " M=" + std::to_string(microbatches) +
                           (limited ? " limit=P" : " no limit"));
              PlanRequest request =
                  MakeRequest(strategy, ranks, microbatches, stages_per_rank, costs.forward,
                              costs.input, costs.weight, costs.comm);
              if (limited) request.memory.limit = ranks;  // 1F1B's peak
              const bool certified =
                  !(stages_per_rank == 2 && costs.comm > 0 && (limited || ranks >= 3));
              const StatusOr<OptimalPlan> solved = Solve(request, certified ? 60 : 5);
              ASSERT_TRUE(solved.ok()) << solved.status().message();
              const double makespan = solved->timeline.metrics.makespan;
              if (certified) {
                EXPECT_EQ(solved->plan.provenance.solver_status, "optimal");
                EXPECT_DOUBLE_EQ(makespan, solved->plan.provenance.proven_bound);
              } else {
                EXPECT_LE(solved->plan.provenance.proven_bound, makespan);
              }
              EXPECT_FALSE(solved->best_heuristic.empty());
              EXPECT_LE(makespan, solved->best_heuristic_makespan);
            }
          }
        }
      }
    }
  }
}

TEST_F(OptimalTest, CertifiesSmallRequestsWithUnitCosts) { CheckGrid({"unit", 1, 1, 1, 0}); }

// The Zero Bubble paper's 1.5B model, costs of its P=8 row.
TEST_F(OptimalTest, CertifiesSmallRequestsWithThePapersCosts) {
  CheckGrid({"1.5B paper", 18522, 18086, 9337, 601});
}

// V-Half and V-Min are optimal at unit costs under their own peak ((P+2)//2 and (P+4)//3
// microbatch activations per rank): the solver proves that no order of the same V placement
// within that memory ends sooner. This derives the figure controllable_memory_test only shows
// to be 6M plus an idle that does not grow with M (v-half 6M + 5 at P = 3 and 4; v-min 6M + 5
// at P = 3 and 6M + 11 at P = 4).
TEST_F(OptimalTest, ControllableMemoryIsOptimalAtUnitCosts) {
  for (const std::string strategy : {"v-half", "v-min"}) {
    for (int ranks : {3, 4}) {
      for (int microbatches : {2 * ranks, 3 * ranks}) {
        SCOPED_TRACE(strategy + " P=" + std::to_string(ranks) +
                     " M=" + std::to_string(microbatches));
        const double heuristic = testing::SimulateOrDie(testing::BuildOrDie(MakeRequest(
                                                            strategy, ranks, microbatches, 2)))
                                     .metrics.makespan;
        PlanRequest request = MakeRequest("optimal-v", ranks, microbatches, 2);
        request.memory.limit = strategy == "v-half" ? (ranks + 2) / 2 : (ranks + 4) / 3;
        const StatusOr<OptimalPlan> solved = Solve(request);
        ASSERT_TRUE(solved.ok()) << solved.status().message();
        EXPECT_EQ(solved->plan.provenance.solver_status, "optimal");
        EXPECT_DOUBLE_EQ(solved->timeline.metrics.makespan, heuristic);
      }
    }
  }
}

// Tight memory limits: the solver's order is proven optimal and strictly faster than every
// heuristic of the catalogue with the same placement (figures in docs/planning.md).
TEST_F(OptimalTest, StrictlyBeatsTheCatalogueUnderTightMemory) {
  struct Case {
    const char* strategy;
    int ranks, stages_per_rank, microbatches;
    double limit, optimum, best_heuristic;
  };
  for (const Case& c : {Case{"optimal", 4, 1, 8, 2, 41, 51}, Case{"optimal", 6, 1, 12, 4, 49, 79},
                        Case{"optimal-v", 4, 2, 8, 1.5, 86, 99}}) {
    SCOPED_TRACE(std::string(c.strategy) + " P=" + std::to_string(c.ranks) +
                 " limit=" + std::to_string(c.limit));
    PlanRequest request = MakeRequest(c.strategy, c.ranks, c.microbatches, c.stages_per_rank);
    request.memory.limit = c.limit;
    const StatusOr<OptimalPlan> solved = Solve(request);
    ASSERT_TRUE(solved.ok()) << solved.status().message();
    EXPECT_TRUE(solved->solver_improved);
    EXPECT_EQ(solved->plan.provenance.solver_status, "optimal");
    EXPECT_DOUBLE_EQ(solved->timeline.metrics.makespan, c.optimum);
    EXPECT_DOUBLE_EQ(solved->best_heuristic_makespan, c.best_heuristic);
  }
}

// Against the whole catalogue at the same work per rank: with 2.5 of 1F1B's 4 activations per
// rank the fastest heuristic (auto's pick, v-min) takes 29.5; optimal-v finds a faster order
// (28 after 20 deterministic seconds, not proven). The same request twice gives the same plan,
// although the search stops at its time limit.
TEST_F(OptimalTest, BeatsEveryHeuristicBetweenVMinAndOneFOneBMemoryDeterministically) {
  PlanRequest share = MakeRequest("auto", 4, 8);
  share.memory.limit = 2.5;
  const StatusOr<Plan> heuristic = testing::PlanOf(share);
  ASSERT_TRUE(heuristic.ok()) << heuristic.status().message();
  const double best_heuristic = testing::SimulateOrDie(*heuristic).metrics.makespan;
  EXPECT_DOUBLE_EQ(best_heuristic, 29.5);

  PlanRequest request = MakeRequest("optimal-v", 4, 8, 2, 0.5, 0.5, 0.5);
  request.memory.limit = 2.5;
  const StatusOr<OptimalPlan> first = Solve(request, 20);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_LT(first->timeline.metrics.makespan, best_heuristic);
  EXPECT_TRUE(first->solver_improved);
  const StatusOr<OptimalPlan> second = Solve(request, 20);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(first->plan, second->plan);
}

TEST_F(OptimalTest, ALimitNothingFitsNamesTheSmallestThatDoes) {
  PlanRequest request = MakeRequest("optimal-v", 4, 8, 2);
  request.memory.limit = 0.5;
  const StatusOr<OptimalPlan> solved = Solve(request);
  ASSERT_FALSE(solved.ok());
  EXPECT_EQ(solved.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(solved.status().message().find("nothing fits the memory limit 0.5 with optimal-v; "
                                           "the smallest limit any order fits is 1 (proven"),
            std::string::npos)
      << solved.status().message();
}

// ---- When nothing fits: stand-ins for the solver, so each answer is known ----

// A stand-in whose makespan solves find nothing under any limit, and whose memory-minimizing
// solve answers `result` with the order `order_of` gives, and that objective and bound (in
// the memory model's unit).
SolveFn StandIn(SolverOutcome::Result result, double objective, double bound,
                std::function<std::vector<int64_t>(const SolverInstance&)> order_of) {
  return [=](const SolverInstance& instance) -> StatusOr<SolverOutcome> {
    SolverOutcome outcome;
    outcome.result = SolverOutcome::Result::kInfeasible;
    if (!instance.minimize_memory) return outcome;
    outcome.result = result;
    outcome.objective = std::llround(objective * instance.memory_scale);
    outcome.bound = std::llround(bound * instance.memory_scale);
    if (result == SolverOutcome::Result::kOptimal || result == SolverOutcome::Result::kFeasible) {
      outcome.starts = order_of(instance);
    }
    return outcome;
  };
}

// Starts that run one microbatch at a time, each op alone: its forwards down the stages, then
// its backwards (or input gradients) up, then its weight gradients. A rank then holds one
// microbatch's activation at most, the least any order can.
std::vector<int64_t> OneMicrobatchAtATime(const SolverInstance& instance) {
  int64_t spacing = 1;
  for (const SolverOp& op : instance.ops) spacing += op.duration + op.setup;
  for (const SolverPrecedence& p : instance.precedences) spacing += p.delay;
  std::vector<std::tuple<int, int, int, size_t>> keys;  // microbatch, phase, position, op
  for (size_t i = 0; i < instance.ops.size(); ++i) {
    const Action& a = instance.ops[i].action;
    const int phase = a.kind == ActionKind::kForward          ? 0
                      : a.kind == ActionKind::kBackwardWeight ? 2
                                                              : 1;
    keys.emplace_back(a.microbatch.value, phase, phase == 1 ? -a.stage.value : a.stage.value, i);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<int64_t> starts(instance.ops.size(), 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    starts[std::get<3>(keys[k])] = static_cast<int64_t>(k) * spacing;
  }
  return starts;
}

std::vector<int64_t> TheHint(const SolverInstance& instance) { return instance.hint; }

// BuildOptimalPlan with `solve` fails as nothing fitting, saying `expected`.
void ExpectNothingFitsSays(const PlanRequest& request, const SolveFn& solve,
                           const std::string& expected) {
  OptimalOptions options;
  options.time_limit_s = 1;
  const StatusOr<OptimalPlan> solved = BuildOptimalPlan(request, options, solve);
  ASSERT_FALSE(solved.ok());
  EXPECT_EQ(solved.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(solved.status().message().find(expected), std::string::npos)
      << solved.status().message();
}

// A limit under one activation: zb plans at a limit of one activation (one microbatch at a
// time), so the message names it, and the limit the solver found infeasible as the bound. The
// memory-minimizing solve starts from zb's order (its hint) and finds nothing smaller.
TEST(OptimalNothingFits, NamesTheCataloguesSmallestOrderAndTheLimitTheSolverRefused) {
  PlanRequest request = MakeRequest("optimal", 2, 4);
  request.memory.limit = 0.5;
  const SolveFn stand_in = StandIn(SolverOutcome::Result::kFeasible, 1000, 0, TheHint);
  int hinted = 0;
  const SolveFn checking = [&](const SolverInstance& instance) {
    if (instance.minimize_memory && instance.hint.size() == instance.ops.size()) ++hinted;
    return stand_in(instance);
  };
  ExpectNothingFitsSays(
      request, checking,
      "nothing fits the memory limit 0.5 with optimal; the smallest limit known to fit is 1 (zb's "
      "order), and none fits at or below 0.5 (proven by the solver)");
  EXPECT_EQ(hinted, 1);
}

// The solver found no order in its time: the catalogue's smallest still stands.
TEST(OptimalNothingFits, NamesTheCataloguesSmallestWhenTheSolverFindsNothing) {
  PlanRequest request = MakeRequest("optimal", 2, 4);
  request.memory.limit = 0.5;
  ExpectNothingFitsSays(request, StandIn(SolverOutcome::Result::kUnknown, 0, 0, TheHint),
                        "known to fit is 1 (zb's order), and none fits at or below 0.5");
}

// B whole: the catalogue's orders (1F1B's 2 activations, GPipe's 4) need more than the solver's
// one microbatch at a time, which the message names as simulated; a bound above the limit is
// the one it gives, and a proven optimum is said as one.
TEST(OptimalNothingFits, NamesTheSolversOrderWhenItNeedsLessThanTheCatalogues) {
  PlanRequest request = MakeRequest("optimal-fb", 2, 4);
  request.memory.limit = 0.5;
  ExpectNothingFitsSays(request,
                        StandIn(SolverOutcome::Result::kFeasible, 1, 0, OneMicrobatchAtATime),
                        "the smallest limit known to fit is 1 (the solver's order), and none fits "
                        "at or below 0.5 (proven by the solver)");
  ExpectNothingFitsSays(request,
                        StandIn(SolverOutcome::Result::kFeasible, 1, 0.8, OneMicrobatchAtATime),
                        "(the solver's order), and none fits below 0.8 (proven by the solver)");
  ExpectNothingFitsSays(request,
                        StandIn(SolverOutcome::Result::kOptimal, 1, 1, OneMicrobatchAtATime),
                        "the smallest limit any order fits is 1 (proven by the solver)");
}

// A solver that finds nothing under a limit an order of the catalogue fits (its rounded figures
// can count more than the simulation does): that order stands.
TEST(OptimalNothingFits, AnOrderThatFitsAsSimulatedStandsWhenTheSolverFindsNone) {
  PlanRequest request = MakeRequest("optimal", 2, 4);
  request.memory.limit = 2;
  OptimalOptions options;
  options.time_limit_s = 1;
  const StatusOr<OptimalPlan> solved =
      BuildOptimalPlan(request, options, StandIn(SolverOutcome::Result::kUnknown, 0, 0, TheHint));
  ASSERT_TRUE(solved.ok()) << solved.status().message();
  EXPECT_FALSE(solved->solver_improved);
  EXPECT_FALSE(solved->best_heuristic.empty());
  for (const RankTimeline& rank : solved->timeline.ranks) EXPECT_LE(rank.peak_memory, 2);
}

// ---- Periodic steady states (large M) ----

std::string OrderString(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& action : actions) out += (out.empty() ? "" : " ") + ToString(action);
  return out;
}

// A result whose starts or period lie past any valid answer's (a result file that is not the
// solver's answer to this instance; found by the solver_result fuzzer, where a period of 9e18
// overflowed the periodic expansion) is refused naming the figure.
TEST(OptimalAnswers, StartsOrAPeriodPastTheHorizonAreRefused) {
  OptimalOptions options;
  options.time_limit_s = 1;
  const auto answering = [](int64_t start, int64_t period) -> SolveFn {
    return [=](const SolverInstance& instance) -> StatusOr<SolverOutcome> {
      SolverOutcome outcome;
      outcome.result = SolverOutcome::Result::kFeasible;
      outcome.objective = 1;
      outcome.starts.assign(instance.ops.size(), 0);
      outcome.starts.back() = start;
      outcome.period = period;
      return outcome;
    };
  };
  const StatusOr<OptimalPlan> whole =
      BuildOptimalPlan(MakeRequest("optimal", 2, 4), options, answering(int64_t{1} << 62, 0));
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("the solver returned start 4611686018427387904"),
            std::string::npos)
      << whole.status().message();
  options.periodic = true;
  const StatusOr<OptimalPlan> periodic = BuildOptimalPlan(MakeRequest("optimal", 2, 4), options,
                                                          answering(0, 9'000'000'000'000'000'000));
  ASSERT_FALSE(periodic.ok());
  EXPECT_NE(periodic.status().message().find("the solver returned period 9000000000000000000"),
            std::string::npos)
      << periodic.status().message();
}

// The expansion of a periodic answer against orders worked out by hand. P = 2, one stage per
// rank, unit costs: microbatch 0 runs F0 at 0, F1 at 1, I1 at 2, W1 at 3, I0 at 4, W0 at 5,
// and the period is 3 (each rank's F, I and W fall on the three different phases).
TEST(PeriodicOrder, RepeatsOneMicrobatchEveryPeriodInStartOrder) {
  const StatusOr<SolverInstance> one = BuildSolverInstance(MakeRequest("optimal", 2, 1));
  ASSERT_TRUE(one.ok()) << one.status().message();
  std::vector<int64_t> starts;
  for (const SolverOp& op : one->ops) {
    const bool first = op.action.stage.value == 0;
    switch (op.action.kind) {
      case ActionKind::kForward:
        starts.push_back(first ? 0 : 1);
        break;
      case ActionKind::kBackwardInput:
        starts.push_back(first ? 4 : 2);
        break;
      case ActionKind::kBackwardWeight:
        starts.push_back(first ? 5 : 3);
        break;
      default:
        FAIL() << "unexpected op " << ToString(op.action);
    }
  }
  const ComputeOrder order = PeriodicOrder(*one, starts, 3, 3);
  ASSERT_EQ(order.size(), 2u);
  // Rank 0: F at 0, 3, 6; I at 4, 7, 10; W at 5, 8, 11.
  EXPECT_EQ(OrderString(order[0]), "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2");
  // Rank 1: F at 1, 4, 7; I at 2, 5, 8; W at 3, 6, 9.
  EXPECT_EQ(OrderString(order[1]), "1F0 1I0 1W0 1F1 1I1 1W1 1F2 1I2 1W2");
  // Re-timed as soon as possible: rank 0's last W ends at 11, one before the steady state's
  // 2 periods + 6 (its I0 of microbatch 0 waits for I1 only until 3, not 4).
  const StatusOr<Plan> plan = BuildPlanFromOrder(MakeRequest("optimal", 2, 3), order);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_DOUBLE_EQ(testing::SimulateOrDie(*plan).metrics.makespan, 11);
}

// The solver's steady state for one microbatch's instance, checked here op by op over all
// `microbatches` repetitions: no two ops of a rank overlap (setups included), every
// precedence holds, and no rank's holds ever exceed its capacity.
void ExpectValidSteadyState(const SolverInstance& one, const SolverOutcome& answer,
                            int microbatches) {
  ASSERT_EQ(answer.starts.size(), one.ops.size());
  ASSERT_GT(answer.period, 0);
  const auto at = [&](int op, int m) { return answer.starts[op] + m * answer.period; };
  for (int rank = 0; rank < one.ranks; ++rank) {
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end)
    for (size_t i = 0; i < one.ops.size(); ++i) {
      if (one.ops[i].rank != rank) continue;
      for (int m = 0; m < microbatches; ++m) {
        busy.emplace_back(at(static_cast<int>(i), m) - one.ops[i].setup,
                          at(static_cast<int>(i), m) + one.ops[i].duration);
      }
    }
    std::sort(busy.begin(), busy.end());
    for (size_t k = 1; k < busy.size(); ++k) {
      EXPECT_GE(busy[k].first, busy[k - 1].second) << "rank " << rank << ": two ops overlap";
    }
  }
  for (const SolverPrecedence& p : one.precedences) {
    EXPECT_GE(answer.starts[p.after],
              answer.starts[p.before] + one.ops[p.before].duration + p.delay);
  }
  if (!one.capacity.has_value()) return;
  for (int rank = 0; rank < one.ranks; ++rank) {
    std::vector<std::pair<int64_t, int64_t>> changes;  // (time, amount); releases sort first
    for (const SolverHold& hold : one.holds) {
      if (hold.rank != rank) continue;
      for (int m = 0; m < microbatches; ++m) {
        changes.emplace_back(at(hold.from, m), hold.amount);
        if (hold.to >= 0) {
          changes.emplace_back(at(hold.to, m) + one.ops[hold.to].duration, -hold.amount);
        }
      }
    }
    std::sort(changes.begin(), changes.end());
    int64_t held = 0;
    int64_t peak = 0;
    for (const auto& [time, amount] : changes) peak = std::max(peak, held += amount);
    EXPECT_LE(peak, (*one.capacity)[rank]) << "rank " << rank;
  }
}

// CP-SAT's periodic answers, run directly on one microbatch's instance and checked by
// ExpectValidSteadyState, with costs that make ops wrap around the end of a period.
TEST_F(OptimalTest, PeriodicAnswersAreValidSteadyStates) {
  struct Case {
    const char* strategy;
    int stages_per_rank;
    double forward, input, weight, comm;
    std::optional<double> limit;
  };
  for (const Case& c :
       {Case{"optimal", 1, 3, 2, 2, 1, std::nullopt}, Case{"optimal", 1, 3, 2, 2, 1, 2},
        Case{"optimal-v", 2, 2, 2, 1, 0.5, 1.5}, Case{"optimal-fb", 1, 2, 3, 0, 1, 2}}) {
    SCOPED_TRACE(std::string(c.strategy) + (c.limit ? " limit " + std::to_string(*c.limit) : ""));
    PlanRequest request =
        MakeRequest(c.strategy, 4, 1, c.stages_per_rank, c.forward, c.input, c.weight, c.comm);
    if (c.strategy == std::string("optimal-fb")) request.costs.stages[0].backward_weight = 0;
    request.memory.limit = c.limit;
    const StatusOr<NormalizedRequest> normalized = Normalize(request);
    ASSERT_TRUE(normalized.ok()) << normalized.status().message();
    StatusOr<SolverInstance> one = BuildSolverInstance(normalized->request);
    ASSERT_TRUE(one.ok()) << one.status().message();
    one->period_microbatches = 32;
    one->time_limit_s = 5;
    const StatusOr<SolverOutcome> answer = app::RunCpSat(*one);
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    ASSERT_TRUE(answer->result == SolverOutcome::Result::kOptimal ||
                answer->result == SolverOutcome::Result::kFeasible);
    ExpectValidSteadyState(*one, *answer, 32);
  }
}

StatusOr<OptimalPlan> SolvePeriodic(const PlanRequest& request, double time_limit_s = 10) {
  OptimalOptions options;
  options.time_limit_s = time_limit_s;
  options.periodic = true;
  return BuildOptimalPlan(request, options, app::RunCpSat);
}

// Without a memory limit the steady state needs no idle time: the period is the busiest
// rank's work for one microbatch (3 V at unit costs), which no steady state can undercut.
TEST_F(OptimalTest, PeriodicPeriodIsTheBusiestRanksWorkWithoutALimit) {
  for (const auto& [strategy, stages_per_rank] :
       {std::pair<const char*, int>{"optimal", 1}, {"optimal-v", 2}, {"optimal-fb", 1}}) {
    SCOPED_TRACE(strategy);
    const StatusOr<OptimalPlan> solved =
        SolvePeriodic(MakeRequest(strategy, 4, 64, stages_per_rank));
    ASSERT_TRUE(solved.ok()) << solved.status().message();
    EXPECT_DOUBLE_EQ(solved->period, 3.0 * stages_per_rank);
    EXPECT_TRUE(solved->period_proven);
    EXPECT_NE(solved->plan.provenance.solver_status.find("the shortest any steady state has"),
              std::string::npos)
        << solved->plan.provenance.solver_status;
    // The steady state repeated 64 times, re-timed: at most 63 periods plus one microbatch's
    // serial span (every op of one microbatch one after another: 3 P V units).
    EXPECT_LE(solved->timeline.metrics.makespan, 63 * solved->period + 3.0 * 4 * stages_per_rank);
  }
}

// P = 8, M = 256 (6144 ops, over the whole-step cap, so periodic by itself) with 4 of 1F1B's 8
// activations per rank: the steady state runs one microbatch every 5 units and takes about
// half as long as the best heuristic (zb, 2567); the same request gives the same plan.
TEST_F(OptimalTest, PeriodicPlansLargeMUnderTightMemoryFarFasterThanTheCatalogue) {
  PlanRequest request = MakeRequest("optimal", 8, 256);
  request.memory.limit = 4;
  OptimalOptions options;
  options.time_limit_s = 10;
  const StatusOr<OptimalPlan> solved = BuildOptimalPlan(request, options, app::RunCpSat);
  ASSERT_TRUE(solved.ok()) << solved.status().message();
  EXPECT_GT(solved->period, 0);  // chosen by itself: the request is over the cap
  EXPECT_TRUE(solved->solver_improved);
  EXPECT_DOUBLE_EQ(solved->best_heuristic_makespan, 2567);
  EXPECT_LT(solved->timeline.metrics.makespan, 0.55 * solved->best_heuristic_makespan);
  EXPECT_LE(solved->timeline.metrics.makespan, 255 * solved->period + 3.0 * 8);
  for (const RankTimeline& rank : solved->timeline.ranks) {
    EXPECT_LE(rank.peak_memory, 4.0) << "rank " << rank.rank.value;
  }
  const StatusOr<OptimalPlan> again = BuildOptimalPlan(request, options, app::RunCpSat);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(solved->plan, again->plan);
}

// B whole under the same limit: no heuristic of the catalogue fits 4 activations at P = 8
// (1F1B needs 8), and the periodic solve still plans the step.
TEST_F(OptimalTest, PeriodicPlansWhereNoHeuristicFits) {
  PlanRequest request = MakeRequest("optimal-fb", 8, 256);
  request.memory.limit = 4;
  const StatusOr<OptimalPlan> solved = SolvePeriodic(request);
  ASSERT_TRUE(solved.ok()) << solved.status().message();
  EXPECT_TRUE(solved->best_heuristic.empty());
  for (const RankTimeline& rank : solved->timeline.ranks) {
    EXPECT_LE(rank.peak_memory, 4.0) << "rank " << rank.rank.value;
  }
  EXPECT_LE(solved->timeline.metrics.makespan, 255 * solved->period + 3.0 * 8);
}

// A periodic plan is one order among all: never faster than the whole step's proven optimum,
// and the whole-step solve of a long steady state (M >= 4P), warm-started from it, is never
// slower than it.
TEST_F(OptimalTest, PeriodicPlanIsBoundedByTheWholeStepOptimum) {
  for (const auto& [ranks, microbatches, limit] :
       {std::tuple<int, int, double>{4, 16, 2}, {6, 24, 3}}) {
    SCOPED_TRACE("P=" + std::to_string(ranks) + " limit " + std::to_string(limit));
    PlanRequest request = MakeRequest("optimal", ranks, microbatches);
    request.memory.limit = limit;
    const StatusOr<OptimalPlan> periodic = SolvePeriodic(request, 2);
    ASSERT_TRUE(periodic.ok()) << periodic.status().message();
    const StatusOr<OptimalPlan> whole = Solve(request);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    ASSERT_EQ(whole->plan.provenance.solver_status, "optimal");
    EXPECT_GE(periodic->timeline.metrics.makespan, whole->timeline.metrics.makespan);
    EXPECT_TRUE(periodic->solver_improved);  // the heuristics are slower still
  }
}

// Below one activation nothing fits, not even one microbatch at a time; no heuristic does
// either, and the error says so rather than returning nothing.
TEST_F(OptimalTest, PeriodicNothingFitsSaysSo) {
  PlanRequest request = MakeRequest("optimal", 4, 256);
  request.memory.limit = 0.5;
  const StatusOr<OptimalPlan> solved = SolvePeriodic(request);
  ASSERT_FALSE(solved.ok());
  EXPECT_EQ(solved.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(solved.status().message().find("nothing fits the memory limit 0.5 with optimal as a "
                                           "periodic schedule, not even one microbatch at a time"),
            std::string::npos)
      << solved.status().message();
}

// ---- auto with the solver ----

// auto --optimal keeps the catalogue's pick unless a solver-made plan is faster, and then it
// must be a proven optimum of its placement that fits the limit: P = 3, M = 6, comm 1.5,
// limit 2 (auto's pick is a V shape; the loop placement's optimum is faster), and P = 4,
// M = 8 with F = 2 (interleaving pays). With slow links (comm 2) zb's order stays.
TEST_F(OptimalTest, AutoWithTheSolverKeepsTheFastestPlan) {
  struct Case {
    int ranks, microbatches;
    double forward, comm;
    std::optional<double> limit;
    bool solver_wins;
  };
  for (const Case& c : {Case{3, 6, 1, 1.5, 2, true}, Case{4, 8, 2, 1, std::nullopt, true},
                        Case{4, 8, 1, 2, std::nullopt, false}}) {
    SCOPED_TRACE("P=" + std::to_string(c.ranks) + " comm " + std::to_string(c.comm));
    PlanRequest request = MakeRequest("auto", c.ranks, c.microbatches, 1, c.forward, 1, 1, c.comm);
    request.memory.limit = c.limit;
    const StatusOr<AutoResult> alone = AutoSearch(request);
    ASSERT_TRUE(alone.ok()) << alone.status().message();
    OptimalOptions options;
    options.time_limit_s = 10;
    const StatusOr<AutoOptimalResult> found = AutoSearchWithSolver(request, options, app::RunCpSat);
    ASSERT_TRUE(found.ok()) << found.status().message();
    EXPECT_GE(found->solved, 2);
    EXPECT_DOUBLE_EQ(found->heuristic_makespan, alone->best.timeline.metrics.makespan);
    EXPECT_EQ(found->heuristic, alone->best.plan);
    const Plan& plan = found->best.plan;
    const double makespan = found->best.timeline.metrics.makespan;
    const Timeline timeline = testing::SimulateOrDie(plan);
    EXPECT_DOUBLE_EQ(timeline.metrics.makespan, makespan);
    for (const RankTimeline& rank : timeline.ranks) {
      EXPECT_LE(rank.peak_memory, c.limit.value_or(1e9)) << "rank " << rank.rank.value;
    }
    if (c.solver_wins) {
      EXPECT_LT(makespan, found->heuristic_makespan);
      EXPECT_EQ(plan.provenance.solver_status, "optimal");
      EXPECT_EQ(plan.provenance.strategy, "auto -> " + plan.request.strategy);
    } else {
      EXPECT_EQ(plan, alone->best.plan);
    }
  }
  PlanRequest validated = MakeRequest("auto", 4, 8);
  validated.options.post_validation = true;
  const StatusOr<AutoOptimalResult> refused =
      AutoSearchWithSolver(validated, OptimalOptions{}, app::RunCpSat);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no post-validation (options.post_validation)"),
            std::string::npos)
      << refused.status().message();
}

TEST(OptimalInstance, RefusesRequestsOverTheSizeCap) {
  PlanRequest request = MakeRequest("optimal", 8, 200);
  const StatusOr<SolverInstance> instance = BuildSolverInstance(request);
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.status().message().find("at most 4000 compute ops; P=8 V=1 M=200 has 4800"),
            std::string::npos)
      << instance.status().message();
}

TEST(OptimalInstance, RefusesATimeLimitThatIsNotPositive) {
  for (const double seconds : {0.0, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    OptimalOptions options;
    options.time_limit_s = seconds;
    const StatusOr<OptimalPlan> solved =
        BuildOptimalPlan(MakeRequest("optimal", 2, 2), options, app::RunCpSat);
    ASSERT_FALSE(solved.ok());
    EXPECT_NE(solved.status().message().find("time_limit_s must be a number of seconds > 0"),
              std::string::npos);
  }
}

// Figures that do not scale to integers are rounded for the solver: the plan stays valid and
// is still never slower than the heuristic, but nothing is claimed proven.
TEST_F(OptimalTest, RoundedFiguresClaimNoProof) {
  const PlanRequest request = MakeRequest("optimal", 2, 2, 1, 1.0 / 3, 1, 1);
  const StatusOr<SolverInstance> instance = BuildSolverInstance(request);
  ASSERT_TRUE(instance.ok());
  EXPECT_FALSE(instance->exact);
  const StatusOr<OptimalPlan> solved = Solve(request);
  ASSERT_TRUE(solved.ok()) << solved.status().message();
  EXPECT_EQ(solved->plan.provenance.solver_status.rfind("feasible, no proven bound", 0), 0u)
      << solved->plan.provenance.solver_status;
  EXPECT_LE(solved->timeline.metrics.makespan, solved->best_heuristic_makespan);
}

// The solver runs a memory-limited search without its LP relaxation only where the figures
// were rounded (no bound is a proof there), so the instance must say which it is.
TEST(SolverInstanceJson, SaysWhetherTheFiguresWereRounded) {
  PlanRequest exact = MakeRequest("optimal", 2, 2, 1, 1, 1, 1);
  exact.memory.limit = 2;
  PlanRequest rounded = MakeRequest("optimal", 2, 2, 1, 1.0 / 3, 1, 1);
  rounded.memory.limit = 2;
  for (const auto& [request, want] :
       {std::pair{exact, "\"exact\":true"}, std::pair{rounded, "\"exact\":false"}}) {
    const StatusOr<SolverInstance> instance = BuildSolverInstance(request);
    ASSERT_TRUE(instance.ok()) << instance.status().message();
    EXPECT_NE(SolverInstanceJson(*instance).find(want), std::string::npos) << want;
  }
}

}  // namespace
}  // namespace pipeplan
