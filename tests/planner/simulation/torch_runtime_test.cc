// The model of torch's runtime (simulation/torch_runtime.h) against an event simulation written
// here from its definition alone (one comm stream per rank in list order, each transfer a
// rendezvous of the k-th send and the k-th receive on its link, compute waiting for its
// receive), solved differently: every action's time relaxed until nothing moves.
#include "pipeplan/simulation/torch_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeplan/checks/validator.h"
#include "pipeplan/passes/torch_lowering.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::BuildOrDie;
using testing::MakeRequest;
using testing::ProgramString;

struct Times {
  std::vector<std::vector<double>> start;
  std::vector<std::vector<double>> end;
};

// The fixed point of the definition: start at 0 everywhere and raise each time to what its
// rules demand until no time changes (the rules only ever raise times, and a plan that runs
// has no cycle among them, so this ends).
Times ReferenceTimes(const Plan& plan, const CostModel& costs) {
  const StageMap stages(plan.request.topology);
  const auto& programs = plan.programs;
  const size_t ranks = programs.size();
  // The other end of each transfer: counted per (from, to) link in list order.
  std::map<std::tuple<int, int, int>, std::pair<int, int>> sends;  // (from, to, k) -> (rank, i)
  std::map<std::tuple<int, int, int>, std::pair<int, int>> receives;
  for (size_t r = 0; r < ranks; ++r) {
    std::map<std::pair<int, int>, int> count;
    for (size_t i = 0; i < programs[r].actions.size(); ++i) {
      const Action& a = programs[r].actions[i];
      if (!IsComm(a.kind)) continue;
      const int me = static_cast<int>(r);
      const int peer = a.peer.value;
      if (IsSend(a.kind)) {
        sends[{me, peer, count[{me, peer}]++}] = {me, static_cast<int>(i)};
      } else {
        receives[{peer, me, count[{peer, me}]++}] = {me, static_cast<int>(i)};
      }
    }
  }
  std::map<std::pair<int, int>, std::pair<int, int>> other;
  for (const auto& [key, send] : sends) {
    const auto receive = receives.at(key);
    other[send] = receive;
    other[receive] = send;
  }
  Times t;
  for (const RankProgram& p : programs) {
    t.start.emplace_back(p.actions.size(), 0.0);
    t.end.emplace_back(p.actions.size(), 0.0);
  }
  // Where a compute's input landed: the end of this rank's receive of it.
  const auto arrival = [&](int rank, const Action& part) {
    const auto& actions = programs[rank].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const bool forward = part.kind == ActionKind::kForward && a.kind == ActionKind::kRecvForward;
      const bool backward =
          (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput) &&
          a.kind == ActionKind::kRecvBackward;
      if ((forward || backward) && a.stage == part.stage && a.microbatch == part.microbatch) {
        return t.end[rank][i];
      }
    }
    return 0.0;  // made on this rank, or the model's own input
  };
  // What a rank has enqueued before action i: its last compute's and last transfer's ends.
  const auto ready = [&](int rank, size_t i) {
    double at = 0.0;
    for (size_t j = 0; j < i; ++j) at = std::max(at, t.end[rank][j]);
    return at;
  };
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t r = 0; r < ranks; ++r) {
      const int rank = static_cast<int>(r);
      for (size_t i = 0; i < programs[r].actions.size(); ++i) {
        const Action& a = programs[r].actions[i];
        double start = 0.0;
        double end = 0.0;
        if (IsCompute(a.kind)) {
          double previous = 0.0;
          for (size_t j = 0; j < i; ++j) {
            if (IsCompute(programs[r].actions[j].kind)) previous = t.end[r][j];
          }
          start = previous;
          double duration = 0.0;
          const std::vector<Action> parts =
              a.kind == ActionKind::kOverlapFB
                  ? std::vector<Action>(a.sub_actions.begin(), a.sub_actions.end())
                  : std::vector<Action>{a};
          for (const Action& part : parts) {
            start = std::max(start, arrival(rank, part));
            duration += costs.ComputeTime(part);
          }
          end = start + duration;
        } else {
          const auto [peer, j] = other.at({rank, static_cast<int>(i)});
          start = std::max(ready(rank, i), ready(peer, static_cast<size_t>(j)));
          const Action& send = IsSend(a.kind) ? a : programs[peer].actions[j];
          const Action& receive = IsSend(a.kind) ? programs[peer].actions[j] : a;
          const double transfer = costs.TransferTime(send.stage, receive.stage);
          end =
              start + (IsSend(a.kind)
                           ? transfer
                           : std::max(transfer, costs.ReceiveOverhead(send.stage, receive.stage)));
        }
        if (start != t.start[r][i] || end != t.end[r][i]) {
          t.start[r][i] = start;
          t.end[r][i] = end;
          changed = true;
        }
      }
    }
  }
  return t;
}

// Uneven figures, so that a wrong wait shows: F 1, I 1.3, W 0.7 (B 2), a transfer 0.25 and a
// receive overhead 0.05.
PlanRequest Request(const std::string& strategy, int ranks, int v) {
  PlanRequest request = MakeRequest(strategy, ranks, 2 * ranks, v, 1.0, 1.3, 0.7, 0.25);
  request.costs.boundaries[0].receive_overhead = 0.05;
  return request;
}

void ExpectMatchesReference(const Plan& plan, TorchLists lists) {
  const StatusOr<TorchRuntimeRun> run =
      SimulateOnTorchRuntime(plan, lists, plan.request.costs, plan.request.memory);
  ASSERT_TRUE(run.ok()) << run.status().message();
  // torch's lists are a plan pipeplan accepts too (so the timeline file written of them is).
  EXPECT_TRUE(ValidatePlan(run->plan).ok()) << ValidatePlan(run->plan).message();
  const Times want = ReferenceTimes(run->plan, plan.request.costs);
  double makespan = 0.0;
  for (size_t r = 0; r < want.end.size(); ++r) {
    ASSERT_EQ(run->timeline.ranks[r].actions.size(), want.end[r].size());
    for (size_t i = 0; i < want.end[r].size(); ++i) {
      const ActionTiming& got = run->timeline.ranks[r].actions[i];
      EXPECT_NEAR(got.start, want.start[r][i], 1e-9) << "rank " << r << " action " << i;
      EXPECT_NEAR(got.end, want.end[r][i], 1e-9) << "rank " << r << " action " << i;
      makespan = std::max(makespan, want.end[r][i]);
    }
  }
  EXPECT_NEAR(run->timeline.metrics.makespan, makespan, 1e-9);
}

struct Case {
  std::string strategy;
  int v;
};

TEST(TorchRuntime, AgreesWithAnEventSimulationOfItsDefinition) {
  const std::vector<Case> cases = {{"1f1b", 1},  {"gpipe", 1}, {"interleaved-1f1b", 2},
                                   {"zb-h1", 1}, {"zbv", 2},   {"interleaved-zb", 2}};
  for (const Case& c : cases) {
    for (const int ranks : {4, 8}) {
      SCOPED_TRACE(c.strategy + " P=" + std::to_string(ranks));
      const Plan plan = BuildOrDie(Request(c.strategy, ranks, c.v));
      ExpectMatchesReference(plan, TorchLists::kPlanTransfers);
      ExpectMatchesReference(plan, TorchLists::kTorchLowering);
    }
  }
}

// 1F1B, P=2, M=2, F=1, B=2, no transfer time. torch's rounds take 0F0 and 1F0, then 0F1 (its
// RECV_F1 lands on rank 1 before 1B0) and 1B0, ...; by hand: 0F0 [0,1], 0F1 [1,2], 1F0 [1,2],
// 1RECV_F1 at 2 (after 1F0 on rank 1's compute stream), 1B0 [2,4], 0B0 [4,6], 1F1 [4,5],
// 1B1 [5,7], 0B1 [7,9]: makespan 9.
TEST(TorchRuntime, OneFOneBByHand) {
  const Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2, 1, 1.0, 1.0, 1.0, 0.0));
  const StatusOr<TorchRuntimeRun> run = SimulateOnTorchRuntime(
      plan, TorchLists::kTorchLowering, plan.request.costs, plan.request.memory);
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(ProgramString(run->plan, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1");
  EXPECT_EQ(ProgramString(run->plan, 1), "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1");
  EXPECT_DOUBLE_EQ(run->timeline.metrics.makespan, 9.0);
}

TEST(TorchRuntime, RefusesWhatTorchDoesNotRun) {
  const Plan dual = BuildOrDie(MakeRequest("dualpipe", 2, 4, 2));
  const StatusOr<TorchRuntimeRun> run = SimulateOnTorchRuntime(
      dual, TorchLists::kPlanTransfers, dual.request.costs, dual.request.memory);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("dual-placement"), std::string::npos);

  PlanRequest request = MakeRequest("zb-h1", 2, 4);
  request.options.post_validation = true;
  const Plan checked = BuildOrDie(request);
  const StatusOr<TorchRuntimeRun> pv = SimulateOnTorchRuntime(
      checked, TorchLists::kPlanTransfers, checked.request.costs, checked.request.memory);
  ASSERT_FALSE(pv.ok());
  EXPECT_NE(pv.status().message().find("post-validation"), std::string::npos);
}

// Every strategy torch runs, planned for torch (receives posted when sent): a valid plan that
// torch's runtime runs no slower than the same order with its receives at their consumers, nor
// than with torch's own transfers.
TEST(TorchRuntime, PlansForTorchRunThereAtLeastAsFastAsTheOtherPlacements) {
  PlanRequest torch = MakeRequest("1f1b", 4, 8);
  torch.runtime = Runtime::kTorch;
  const std::vector<const Strategy*> strategies = CandidateStrategies(torch);
  ASSERT_GE(strategies.size(), 15u);  // the catalogue less dualpipe
  for (const Strategy* strategy : strategies) {
    const int v = strategy->min_stages_per_rank <= 1 ? 1 : 2;
    SCOPED_TRACE(std::string(strategy->name));
    PlanRequest request = MakeRequest(std::string(strategy->name), 4, 8, v, 1.0, 1.2, 0.8, 0.1);
    const Plan anywhere = BuildOrDie(request);
    request.runtime = Runtime::kTorch;
    const Plan for_torch = BuildOrDie(request);
    ASSERT_TRUE(ValidatePlan(for_torch).ok()) << ValidatePlan(for_torch).message();
    const auto step = [](const Plan& plan, TorchLists lists) {
      const StatusOr<TorchRuntimeRun> run =
          SimulateOnTorchRuntime(plan, lists, plan.request.costs, plan.request.memory);
      EXPECT_TRUE(run.ok()) << run.status().message();
      return run.ok() ? run->timeline.metrics.makespan : 0.0;
    };
    const double torch_placed = step(for_torch, TorchLists::kPlanTransfers);
    EXPECT_LE(torch_placed, step(anywhere, TorchLists::kPlanTransfers) + 1e-9);
    EXPECT_LE(torch_placed, step(for_torch, TorchLists::kTorchLowering) + 1e-9);
  }
}

// A comm order the validator accepts (its dry run lets a run of transfers complete together,
// as one NCCL group would) but torch's one-transfer-per-batch lists cannot run: rank 0 sends
// 0F1 and then receives 1B0; rank 1 sends 1B0 first, so each waits for the other's second.
TEST(TorchRuntime, NamesListsThatWaitOnEachOther) {
  Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2, 1, 1.0, 1.0, 1.0, 0.0));
  ASSERT_EQ(ProgramString(plan, 1), "1RECV_F0 1F0 1B0 1RECV_F1 1SEND_B0 1F1 1B1 1SEND_B1");
  std::swap(plan.programs[1].actions[3], plan.programs[1].actions[4]);
  ASSERT_TRUE(ValidatePlan(plan).ok()) << ValidatePlan(plan).message();
  const StatusOr<TorchRuntimeRun> run = SimulateOnTorchRuntime(
      plan, TorchLists::kPlanTransfers, plan.request.costs, plan.request.memory);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(),
            "on torch's runtime these lists wait on each other forever (one comm stream per "
            "rank: a transfer starts only when both ends reach it): rank 0, action 3 (0SEND_F1) "
            "waits for rank 1; rank 1, action 3 (1SEND_B0) waits for rank 0");
}

// torch stops where no rank's next compute has its input; so does the lowering.
TEST(TorchLowering, NamesAnOrderItCannotPlace) {
  Plan plan = BuildOrDie(MakeRequest("1f1b", 2, 2, 1, 1.0, 1.0, 1.0, 0.0));
  // Rank 0 starts with a backward, whose gradient rank 1 makes only after 0F0's activation.
  std::vector<Action> compute;
  for (const Action& a : plan.programs[0].actions) {
    if (IsCompute(a.kind)) compute.push_back(a);
  }
  std::rotate(compute.begin(), compute.begin() + 2, compute.end());  // 0B0 0B1 0F0 0F1
  plan.programs[0].actions = compute;
  const StatusOr<std::vector<RankProgram>> lowered =
      LowerAsTorch(plan.programs, plan.request.topology);
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().message(),
            "torch's lowering (_add_send_recv) cannot place the transfers of this compute order: "
            "rank 0 waits at 0B0 for its input; rank 1 waits at 1F0 for its input");
}

}  // namespace
}  // namespace pipeplan
