// One conformance suite over every strategy: on a grid of P, V and M, each
// plan the strategy accepts must be complete, respect dependencies in its simulated times,
// pair its sends and receives per rank pair, finish a rendezvous dry run, account memory
// consistently and be deterministic. The checks here are written independently of the
// validator so they do not trust the code under test.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "pipeplan/checks/validator.h"
#include "pipeplan/passes/post_validation.h"
#include "pipeplan/strategies/strategy.h"
#include "test_support.h"

namespace pipeplan {
namespace {

using testing::MakeRequest;

constexpr double kLatency = 0.25;

// Which (P, V, M) a strategy accepts, stated from docs/strategies.md.
bool Accepts(const std::string& name, int p, int v, int m) {
  if (name == "gpipe" || name == "1f1b" || name == "zb-h1") return v == 1;
  if (name == "zb-h2") return v == 1 && m >= 2 * p;
  if (name == "looped-bfs") return true;
  if (name == "interleaved-1f1b") return v >= 2 && m >= p && m % p == 0;  // default G = P
  if (name == "interleaved-1f1b-overlap") return v >= 2 && m >= p && m % p == 0;
  if (name == "interleaved-zb") return v >= 2 && m % std::max(1, m / p) == 0;
  if (name == "zbv-handcrafted") return v == 2;
  if (name == "dualpipe-v") return v == 2 && m >= 2 * p;
  if (name == "dualpipe") return v == 2 && p % 2 == 0 && m % 2 == 0 && m >= 2 * p;
  if (name == "1f1b-overlap") return v == 1;
  if (name == "zb" || name == "zb-1p" || name == "zb-2p") return v == 1;
  if (name == "zbv") return v == 2;
  if (name == "v-half" || name == "v-min") return v == 2;
  ADD_FAILURE() << "no acceptance rule for " << name;
  return false;
}

struct Key {
  int kind;  // 0 F, 1 B or I, 2 W
  int stage;
  int mb;
  auto operator<=>(const Key&) const = default;
};

std::vector<Key> KeysOf(const Action& action) {
  std::vector<Key> keys;
  auto add = [&](const Action& a) {
    const int kind = a.kind == ActionKind::kForward          ? 0
                     : a.kind == ActionKind::kBackwardWeight ? 2
                                                             : 1;
    keys.push_back({kind, a.stage.value, a.microbatch.value});
  };
  if (action.kind == ActionKind::kOverlapFB) {
    for (const Action& sub : action.sub_actions) add(sub);
  } else {
    add(action);
  }
  return keys;
}

// Microbatches per stage: each of DualPipe's two model copies takes half of them.
int PerStage(const Plan& plan) {
  const Topology& t = plan.request.topology;
  return t.placement == Placement::kDual ? t.microbatches / 2 : t.microbatches;
}

void ExpectComplete(const Plan& plan, int stages) {
  const int m = PerStage(plan);
  std::map<Key, int> count;
  std::map<std::pair<int, int>, int> inputs;  // (stage, mb) -> I count
  std::map<int, int> stage_rank;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (!IsCompute(action.kind)) continue;
      for (const Key& key : KeysOf(action)) {
        ++count[key];
        const auto [it, inserted] = stage_rank.emplace(key.stage, program.rank.value);
        EXPECT_EQ(it->second, program.rank.value) << "stage " << key.stage << " on two ranks";
      }
      if (action.kind == ActionKind::kBackwardInput)
        ++inputs[{action.stage.value, action.microbatch.value}];
    }
  }
  for (int s = 0; s < stages; ++s) {
    for (int mb = 0; mb < m; ++mb) {
      EXPECT_EQ((count[{0, s, mb}]), 1) << "F stage " << s << " mb " << mb;
      EXPECT_EQ((count[{1, s, mb}]), 1) << "B/I stage " << s << " mb " << mb;
      // A W exactly when the backward was split into I + W.
      EXPECT_EQ((count[{2, s, mb}]), (inputs[{s, mb}])) << "W stage " << s << " mb " << mb;
    }
  }
}

// Every action starts after its producers end (plus latency across ranks).
void ExpectDependenciesInTime(const Plan& plan, const Timeline& t) {
  std::map<Key, std::pair<double, int>> end;  // key -> (end, rank)
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const auto& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsCompute(actions[i].kind)) continue;
      for (const Key& key : KeysOf(actions[i]))
        end[key] = {t.ranks[r].actions[i].end, static_cast<int>(r)};
    }
  }
  const StageMap stages(plan.request.topology);
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const auto& actions = plan.programs[r].actions;
    double previous_end = 0;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsCompute(actions[i].kind)) continue;
      const double start = t.ranks[r].actions[i].start;
      EXPECT_GE(start, previous_end) << "rank " << r << " overlaps itself at action " << i;
      previous_end = t.ranks[r].actions[i].end;
      for (const Key& key : KeysOf(actions[i])) {
        std::vector<Key> needs;
        const bool first = stages.IsFirst(StageId(key.stage));
        const bool last = stages.IsLast(StageId(key.stage));
        if (key.kind == 0 && !first) needs.push_back({0, key.stage - 1, key.mb});
        if (key.kind == 1) needs.push_back({0, key.stage, key.mb});
        if (key.kind == 1 && !last) needs.push_back({1, key.stage + 1, key.mb});
        if (key.kind == 2) needs.push_back({1, key.stage, key.mb});
        for (const Key& need : needs) {
          const auto [producer_end, producer_rank] = end.at(need);
          const double ready = producer_end + (producer_rank != static_cast<int>(r) ? kLatency : 0);
          EXPECT_GE(start + 1e-9, ready) << ToString(actions[i]) << " on rank " << r;
        }
      }
    }
  }
}

// Per ordered rank pair, the k-th send and the k-th receive carry the same tensor.
void ExpectPairing(const Plan& plan) {
  std::map<std::pair<int, int>, std::vector<std::tuple<bool, int, int>>> sends, recvs;
  for (const RankProgram& program : plan.programs) {
    for (const Action& a : program.actions) {
      const int r = program.rank.value;
      switch (a.kind) {
        case ActionKind::kSendForward:
          sends[{r, a.peer.value}].push_back({true, a.stage.value + 1, a.microbatch.value});
          break;
        case ActionKind::kSendBackward:
          sends[{r, a.peer.value}].push_back({false, a.stage.value - 1, a.microbatch.value});
          break;
        case ActionKind::kRecvForward:
          recvs[{a.peer.value, r}].push_back({true, a.stage.value, a.microbatch.value});
          break;
        case ActionKind::kRecvBackward:
          recvs[{a.peer.value, r}].push_back({false, a.stage.value, a.microbatch.value});
          break;
        default:
          break;
      }
    }
  }
  EXPECT_EQ(sends, recvs);
}

// Stricter than the runtime: every single transfer is a rendezvous of its own.
void ExpectRendezvousFinishes(const Plan& plan) {
  const size_t ranks = plan.programs.size();
  std::vector<size_t> pc(ranks, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      const auto& actions = plan.programs[r].actions;
      while (pc[r] < actions.size() && !IsComm(actions[pc[r]].kind)) ++pc[r], progress = true;
      if (pc[r] >= actions.size()) continue;
      const Action& mine = actions[pc[r]];
      const int peer = mine.peer.value;
      if (pc[peer] >= plan.programs[peer].actions.size()) continue;
      const Action& theirs = plan.programs[peer].actions[pc[peer]];
      if (!IsComm(theirs.kind) || theirs.peer.value != static_cast<int>(r)) continue;
      auto is_send = [](ActionKind k) {
        return k == ActionKind::kSendForward || k == ActionKind::kSendBackward ||
               k == ActionKind::kSendPostValidation;
      };
      const bool i_send = is_send(mine.kind);
      const bool they_send = is_send(theirs.kind);
      if (i_send == they_send) continue;
      ++pc[r];
      ++pc[peer];
      progress = true;
    }
  }
  for (size_t r = 0; r < ranks; ++r) {
    EXPECT_EQ(pc[r], plan.programs[r].actions.size()) << "rank " << r << " stuck in rendezvous";
  }
}

void ExpectMemoryConsistent(const Plan& plan, const Timeline& t) {
  // One stage holds 1/V of a rank's share (a whole share under DualPipe's two copies).
  const int v = plan.request.topology.placement == Placement::kDual
                    ? 1
                    : plan.request.topology.stages_per_rank;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    double held = 0, peak = 0;
    for (const Action& action : plan.programs[r].actions) {
      if (!IsCompute(action.kind)) continue;
      for (const Key& key : KeysOf(action)) {
        if (key.kind == 0) held += 1.0 / v;
      }
      peak = std::max(peak, held);
      for (const Key& key : KeysOf(action)) {
        if (key.kind != 0)
          held -= 1.0 / v * (key.kind == 1 && action.kind == ActionKind::kBackwardInput ? 0 : 1);
      }
    }
    EXPECT_NEAR(held, 0, 1e-9) << "rank " << r << " leaks activations";
    EXPECT_NEAR(t.ranks[r].peak_activation_memory, peak, 1e-9) << "rank " << r;
    for (const MemorySample& sample : t.ranks[r].memory) EXPECT_GE(sample.bytes, -1e-9);
  }
}

class StrategyConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(StrategyConformance, EveryAcceptedPlanIsCompleteOrderedPairedDeadlockFreeAndDeterministic) {
  const std::string name = GetParam();
  int planned = 0;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int v : {1, 2, 4}) {
      for (int m = 1; m <= 4 * p; ++m) {
        SCOPED_TRACE(name + " P=" + std::to_string(p) + " V=" + std::to_string(v) +
                     " M=" + std::to_string(m));
        PlanRequest request = MakeRequest(name, p, m, v, 1, 1, 1, kLatency);
        if (name == "zb") request.memory.limit = 1.5 * p;  // between zb-1p's and zb-2p's
        const StatusOr<Plan> plan = BuildPlan(request);
        ASSERT_EQ(plan.ok(), Accepts(name, p, v, m)) << plan.status().message();
        if (!plan.ok()) continue;
        ++planned;
        const StatusOr<Timeline> timeline = Simulate(*plan);
        ASSERT_TRUE(timeline.ok()) << timeline.status().message();
        ExpectComplete(*plan, p * v);
        ExpectDependenciesInTime(*plan, *timeline);
        ExpectPairing(*plan);
        ExpectRendezvousFinishes(*plan);
        ExpectMemoryConsistent(*plan, *timeline);
        EXPECT_TRUE(ValidatePlan(*plan).ok());
        EXPECT_GE(timeline->metrics.makespan + 1e-9, timeline->metrics.lower_bound);
        // Determinism: a second run gives the same plan and the same timeline.
        const StatusOr<Plan> again = BuildPlan(request);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(*again, *plan);
        EXPECT_EQ(*Simulate(*again), *timeline);
        // BuildAndSimulatePlan reuses comm insertion's list schedule and skips the second
        // compute-order check: it must still give the same plan and the same timeline.
        const StatusOr<Evaluated> both = BuildAndSimulatePlan(request);
        ASSERT_TRUE(both.ok()) << both.status().message();
        EXPECT_EQ(both->plan, *plan);
        EXPECT_EQ(both->timeline, *timeline);
      }
    }
  }
  EXPECT_GE(planned, 15) << "the grid exercised too few plans for " << name;
}

// The same checks with post-validation on, for the zero-bubble family: PV must keep plans
// complete, paired and deadlock-free, with exactly one PV per rank.
TEST_P(StrategyConformance, PostValidationKeepsPlansValid) {
  const std::string name = GetParam();
  if (!SupportsPostValidation(name)) {
    PlanRequest request = MakeRequest(name, 2, 4, name.find("interleaved") == 0 ? 2 : 0);
    request.options.post_validation = true;
    EXPECT_FALSE(BuildPlan(request).ok()) << name << " accepted --post-validation";
    return;
  }
  int planned = 0;
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      for (int v : {1, 2}) {
        if (!Accepts(name, p, v, m)) continue;
        SCOPED_TRACE(name + " P=" + std::to_string(p) + " V=" + std::to_string(v) +
                     " M=" + std::to_string(m));
        PlanRequest request = MakeRequest(name, p, m, v, 1, 1, 1, kLatency);
        if (name == "zb") request.memory.limit = 1.5 * p;
        request.options.post_validation = true;
        const StatusOr<Plan> plan = BuildPlan(request);
        ASSERT_TRUE(plan.ok()) << plan.status().message();
        ++planned;
        for (const RankProgram& program : plan->programs) {
          int validations = 0;
          for (const Action& a : program.actions)
            validations += a.kind == ActionKind::kPostValidation ? 1 : 0;
          EXPECT_EQ(validations, 1) << "rank " << program.rank.value;
        }
        const StatusOr<Timeline> timeline = Simulate(*plan);
        ASSERT_TRUE(timeline.ok()) << timeline.status().message();
        ExpectComplete(*plan, p * v);
        ExpectPairing(*plan);
        ExpectRendezvousFinishes(*plan);
        EXPECT_TRUE(ValidatePlan(*plan).ok());
        const StatusOr<Evaluated> both = BuildAndSimulatePlan(request);
        ASSERT_TRUE(both.ok()) << both.status().message();
        EXPECT_EQ(both->plan, *plan);
        EXPECT_EQ(both->timeline, *timeline);
      }
    }
  }
  EXPECT_GT(planned, 0);
}

std::vector<std::string> AllStrategyNames() {
  std::vector<std::string> names;
  for (const Strategy& strategy : AllStrategies()) names.emplace_back(strategy.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, StrategyConformance,
                         ::testing::ValuesIn(AllStrategyNames()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace pipeplan
