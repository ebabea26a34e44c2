// Memory in bytes on CPU: the counting allocator charges each thread's allocations to the
// meter whose scope is open there, exactly, and the torch executor's timelines carry what
// each action kept and freed, as the schedule says they must. (CUDA: cuda_test.cc.)
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeplan/planner/planner.h"
#include "pipeplan/runtime/inproc_transport.h"
#include "pipeplan/runtime/local_run.h"
#include "pipeplan/torch_ext/memory_meter.h"
#include "pipeplan/torch_ext/torch_executor.h"

namespace pipeplan::torch_ext {
namespace {

std::unique_ptr<MemoryMeter> CpuMeter() {
  StatusOr<std::unique_ptr<MemoryMeter>> meter = MakeMemoryMeter(at::Device("cpu"));
  EXPECT_TRUE(meter.ok()) << meter.status().message();
  return meter.ok() ? std::move(*meter) : nullptr;
}

TEST(CpuMemoryMeter, CountsTheBytesTensorsAskForInsideItsScope) {
  const std::unique_ptr<MemoryMeter> meter = CpuMeter();
  ASSERT_NE(meter, nullptr);
  at::Tensor outside = at::empty({1000}, at::kFloat);  // no scope: charged to nobody
  EXPECT_EQ(meter->Allocated(), 0);
  {
    const MemoryMeter::Scope scope(meter.get());
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(meter->Allocated(), 4000);
    {
      at::Tensor b = at::empty({250, 2}, at::kDouble);
      EXPECT_EQ(meter->Allocated(), 8000);
    }
    EXPECT_EQ(meter->Allocated(), 4000);
    EXPECT_EQ(meter->Peak(), 8000);
    meter->ResetPeak();
    EXPECT_EQ(meter->Peak(), 4000);
  }
  EXPECT_EQ(meter->Allocated(), 0);  // `a` went back when it died, outside the scope too
  outside = at::Tensor();
  EXPECT_EQ(meter->Allocated(), 0);
  EXPECT_EQ(meter->Peak(), 4000);
}

TEST(CpuMemoryMeter, EachThreadChargesItsOwnMeterAndAFreeGoesBackToTheOneThatCounted) {
  const std::unique_ptr<MemoryMeter> first = CpuMeter();
  const std::unique_ptr<MemoryMeter> second = CpuMeter();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  std::vector<at::Tensor> kept(2);
  auto allocate = [&](MemoryMeter* meter, int index, int64_t floats) {
    const MemoryMeter::Scope scope(meter);
    for (int i = 0; i < 200; ++i) at::empty({floats}, at::kFloat);  // churn, freed at once
    kept[index] = at::empty({floats}, at::kFloat);
  };
  std::thread one(allocate, first.get(), 0, 300);
  std::thread two(allocate, second.get(), 1, 5000);
  one.join();
  two.join();
  EXPECT_EQ(first->Allocated(), 1200);
  EXPECT_EQ(second->Allocated(), 20000);
  {
    // Freed on this thread, inside the other meter's scope: still the first meter's bytes.
    const MemoryMeter::Scope scope(second.get());
    kept[0] = at::Tensor();
  }
  EXPECT_EQ(first->Allocated(), 0);
  EXPECT_EQ(second->Allocated(), 20000);
}

// Two ranks taking turns on one allocator (the process's CPU account, as ranks share a GPU's
// caching allocator): each counts what changed in its own turns, its peak included.
TEST(TurnMeter, EachRankCountsWhatChangedInItsOwnTurns) {
  const StatusOr<std::shared_ptr<MemoryMeter>> device = DeviceMeter(at::Device("cpu"));
  ASSERT_TRUE(device.ok()) << device.status().message();
  const std::unique_ptr<MemoryMeter> a = MakeTurnMeter(*device);
  const std::unique_ptr<MemoryMeter> b = MakeTurnMeter(*device);
  const int64_t before = (*device)->Allocated();
  at::Tensor a_kept;
  at::Tensor b_kept;
  {
    const MemoryMeter::Scope turn(a.get());
    a_kept = at::empty({1000}, at::kFloat);
  }
  {
    const MemoryMeter::Scope turn(b.get());
    b_kept = at::empty({250}, at::kFloat);
    EXPECT_EQ(b->Allocated(), 1000);
  }
  EXPECT_EQ(a->Allocated(), 4000);
  EXPECT_EQ(b->Allocated(), 1000);
  EXPECT_EQ((*device)->Allocated() - before, 5000);  // the device holds both
  {
    const MemoryMeter::Scope turn(a.get());
    a->ResetPeak();
    {
      const at::Tensor transient = at::empty({2000}, at::kFloat);
      EXPECT_EQ(a->Allocated(), 12000);
    }
    a_kept = at::Tensor();
    EXPECT_EQ(a->Allocated(), 0);
    EXPECT_EQ(a->Peak(), 12000);
  }
  EXPECT_EQ(a->Allocated(), 0);
  EXPECT_EQ(a->Peak(), 12000);
  EXPECT_EQ(b->Allocated(), 1000);  // a's turns left b's bytes alone
  EXPECT_EQ(b->Peak(), 1000);
  {
    const MemoryMeter::Scope turn(b.get());
    b_kept = at::Tensor();
  }
  EXPECT_EQ(b->Allocated(), 0);
  EXPECT_EQ((*device)->Allocated(), before);
}

// Per rank, the memory measured in one step of `strategy` with every rank a thread here; with
// `turns` the ranks take turns and share one allocator's figures (as on one GPU).
std::vector<RankTimeline> MeasuredStep(const std::string& strategy, int ranks, int microbatches,
                                       Plan& plan, bool turns = false) {
  PlanRequest request;
  request.strategy = strategy;
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  request.topology.stages_per_rank = 0;  // the strategy's own
  StatusOr<Plan> built = BuildPlan(request);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built.ok()) return {};
  plan = *built;
  TorchExecutorOptions options;
  options.model.hidden = 128;
  options.model.sequence = 32;
  options.memory_in_turns = turns;
  std::vector<std::unique_ptr<TorchExecutor>> executors;
  std::vector<runtime::OpExecutor*> executor_ptrs;
  for (int r = 0; r < ranks; ++r) {
    StatusOr<std::unique_ptr<TorchExecutor>> executor =
        TorchExecutor::Create(plan, RankId(r), options);
    EXPECT_TRUE(executor.ok()) << executor.status().message();
    if (!executor.ok()) return {};
    executors.push_back(std::move(*executor));
    executor_ptrs.push_back(executors.back().get());
  }
  const auto transports = runtime::MakeInProcTransports(ranks);
  std::vector<runtime::Transport*> transport_ptrs;
  for (const auto& t : transports) transport_ptrs.push_back(t.get());
  runtime::LocalRunOptions run;
  run.steps = 1;
  run.warmup = 1;  // gradients and optimizer state exist from the first step on
  run.timeout_seconds = 60;
  std::mutex device;
  run.shared_device = turns ? &device : nullptr;
  StatusOr<std::vector<Timeline>> steps =
      runtime::RunLocal(plan, executor_ptrs, transport_ptrs, run);
  EXPECT_TRUE(steps.ok()) << steps.status().message();
  if (!steps.ok()) return {};
  return steps->front().ranks;
}

TEST(TorchExecutorMemory, EachForwardKeepsItsActivationUntilItsBackwardAndOneFOneBHoldsP) {
  Plan plan;
  const int ranks = 2;
  const std::vector<RankTimeline> measured = MeasuredStep("1f1b", ranks, 4, plan);
  ASSERT_EQ(measured.size(), 2u);
  for (int r = 0; r < ranks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const RankProgram& program = plan.programs[r];
    const RankTimeline& timeline = measured[r];
    ASSERT_EQ(timeline.memory_unit, MemoryUnit::kBytes);
    ASSERT_EQ(timeline.action_memory.size(), program.actions.size());
    std::map<int, double> kept_by_f;  // by microbatch
    std::map<int, double> received;   // by microbatch: what its RECV_F and RECV_B allocated
    for (size_t i = 0; i < program.actions.size(); ++i) {
      const Action& action = program.actions[i];
      const ActionMemory& m = timeline.action_memory[i];
      EXPECT_GE(m.peak, std::max(m.start, m.end)) << "action " << i;
      const int mb = action.microbatch.value;
      if (action.kind == ActionKind::kRecvForward) {
        EXPECT_GT(m.end - m.start, 0) << "a RECV_F allocates its message, action " << i;
      }
      if (action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kRecvBackward) {
        received[mb] += m.end - m.start;
      }
      if (action.kind == ActionKind::kForward) kept_by_f[mb] = m.end - m.start;
      if (action.kind != ActionKind::kBackward) continue;
      // B frees what its F kept (the saved activations, the output sent on) and the messages
      // received for it, but for the gradient it sends (the shape of its input), kept until
      // its send completed. The last stage's F also keeps the microbatch's loss (4 bytes) until
      // the step ends.
      const double kept = kept_by_f.at(mb);
      const double loss = r == ranks - 1 ? 4.0 : 0.0;
      // On 2 ranks each rank receives one message per microbatch: rank 0 the gradient, rank 1
      // the input (the size of the gradient it sends back).
      const double kept_until_the_end = r > 0 ? received.at(mb) : 0.0;
      EXPECT_EQ(m.start - m.end, kept + received.at(mb) - kept_until_the_end - loss)
          << "action " << i;
    }
    ASSERT_EQ(kept_by_f.size(), 4u);
    const double activation = kept_by_f.at(0);
    EXPECT_GT(activation, 0.0);
    for (const auto& [mb, kept] : kept_by_f) EXPECT_EQ(kept, activation) << "microbatch " << mb;
    // 1F1B holds at most P - r microbatches' activations on rank r (its warm-up plus one):
    // the step's peak above its start lies between that many and one more.
    const double held = ranks - r;
    EXPECT_GE(timeline.peak_activation_memory, held * activation);
    EXPECT_LT(timeline.peak_activation_memory, (held + 1) * activation);
    EXPECT_EQ(timeline.peak_memory - timeline.peak_activation_memory,
              timeline.action_memory[0].start)
        << "static memory: what the rank held when its first action began";
  }
}

// Each stage's static bytes tell its data apart: the model's inputs on the first stage and the
// loss's targets on the last, one [microbatch, sequence, hidden] float tensor per microbatch
// (calibrate keeps them with the chain's ends when a plan cuts the model otherwise).
TEST(TorchExecutorMemory, EachStageTellsItsDataApartFromItsStaticBytes) {
  Plan plan;
  const int microbatches = 4;
  const std::vector<RankTimeline> measured = MeasuredStep("1f1b", 2, microbatches, plan);
  ASSERT_EQ(measured.size(), 2u);
  const double data = microbatches * 2.0 * 32 * 128 * 4;  // microbatch 2, sequence 32, hidden 128
  ASSERT_EQ(measured[0].stage_static.size(), 1u);
  ASSERT_EQ(measured[1].stage_static.size(), 1u);
  const StageStatic& first = measured[0].stage_static[0];
  const StageStatic& last = measured[1].stage_static[0];
  EXPECT_EQ(first.input_bytes, data);
  EXPECT_EQ(first.target_bytes, 0);
  EXPECT_EQ(last.input_bytes, 0);
  EXPECT_EQ(last.target_bytes, data);
  // The rest is the stage's parameters, their gradients and the optimizer's state.
  EXPECT_GT(first.bytes, first.input_bytes);
  EXPECT_GT(last.bytes, last.target_bytes);
}

// Ranks taking turns on one allocator (as P ranks on one GPU do) count what each would count
// with an allocator of its own: every action's bytes and each rank's static memory are the
// per-thread run's to the byte; a peak may differ by the gradients sent and not yet taken
// (when a receiver takes one depends on the timing).
TEST(TorchExecutorMemory, RanksTakingTurnsOnOneAllocatorCountAsIfApart) {
  for (const char* strategy : {"1f1b", "zbv"}) {
    SCOPED_TRACE(strategy);
    Plan plan;
    const std::vector<RankTimeline> apart = MeasuredStep(strategy, 2, 4, plan);
    const std::vector<RankTimeline> turns = MeasuredStep(strategy, 2, 4, plan, /*turns=*/true);
    ASSERT_EQ(apart.size(), 2u);
    ASSERT_EQ(turns.size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      ASSERT_EQ(turns[r].memory_unit, MemoryUnit::kBytes);
      ASSERT_EQ(turns[r].action_memory.size(), apart[r].action_memory.size());
      double message = 0;
      for (size_t i = 0; i < apart[r].action_memory.size(); ++i) {
        const ActionMemory& one = apart[r].action_memory[i];
        const ActionMemory& other = turns[r].action_memory[i];
        EXPECT_EQ(other.end - other.start, one.end - one.start) << "action " << i;
        EXPECT_EQ(other.peak - other.start, one.peak - one.start) << "action " << i;
        if (plan.programs[r].actions[i].kind == ActionKind::kRecvForward ||
            plan.programs[r].actions[i].kind == ActionKind::kRecvBackward) {
          message = one.end - one.start;
        }
      }
      EXPECT_GT(message, 0);
      EXPECT_EQ(turns[r].action_memory[0].start, apart[r].action_memory[0].start) << "static";
      EXPECT_LE(std::abs(turns[r].peak_memory - apart[r].peak_memory), 2 * message);
    }
  }
}

}  // namespace
}  // namespace pipeplan::torch_ext
