// The solver-made strategies' instance (optimal.h): a request's compute ops with their
// durations, dependencies, memory and ranks in integers, and an instance's starts back to a
// compute order.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/planner/optimal.h"
#include "pipeplan/simulation/memory_tracker.h"
#include "solver_figures.h"

namespace pipeplan {
namespace {

using solver::Down;
using solver::Nearest;
using solver::Up;

// The largest integer any scaled figure may reach: sums of them stay far inside int64.
constexpr double kLargestScaled = 1e12;

struct Scale {
  double factor = 1.0;
  bool exact = true;
};

// The smallest power of ten that makes every value an integer, or, when none up to 10^6 does,
// the factor that brings the largest to about 10^6 (then the figures are rounded).
Scale FindScale(const std::vector<double>& values) {
  const double largest = values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
  for (double factor = 1.0; factor <= 1e6; factor *= 10) {
    if (largest * factor > kLargestScaled) break;
    const bool integral = std::all_of(values.begin(), values.end(), [&](double v) {
      const double scaled = v * factor;
      return std::abs(scaled - std::round(scaled)) <= 1e-9 * std::max(1.0, std::abs(scaled));
    });
    if (integral) return {factor, true};
  }
  return {largest > 0 ? 1e6 / largest : 1.0, false};
}

// The compute parts of one (stage, microbatch): F, then I and W or B.
struct PartOps {
  int forward = -1;
  int backward = -1;  // I, or B when not split
  int weight = -1;    // W; -1 when not split
};

class InstanceBuilder {
 public:
  InstanceBuilder(const PlanRequest& request, bool split)
      : request_(request),
        stages_(request.topology),
        split_(split),
        parts_(stages_.num_stages(), request.topology.microbatches, PartOps{}) {}

  StatusOr<SolverInstance> Build() {
    const Topology& t = request_.topology;
    // A periodic solve's instance is one microbatch's: its whole step is the unit.
    PIPEPLAN_RETURN_IF_ERROR(solver::CheckSolverSize(t, split_, /*periodic=*/false));
    time_ = FindScale(TimeFigures());
    memory_ = FindScale(MemoryFigures());
    out_.ranks = t.ranks;
    out_.time_scale = time_.factor;
    out_.memory_scale = memory_.factor;
    out_.exact = time_.exact && memory_.exact;
    AddOps();
    AddPrecedences();
    AddHolds();
    AddMemoryLimit();
    int64_t horizon = 0;
    for (const SolverOp& op : out_.ops) horizon += op.duration + op.setup;
    for (const SolverPrecedence& p : out_.precedences) horizon += p.delay;
    out_.horizon = std::max<int64_t>(horizon, 1);
    return std::move(out_);
  }

 private:
  std::vector<double> TimeFigures() const {
    std::vector<double> figures;
    for (int s = 0; s < stages_.num_stages(); ++s) {
      const StageCosts& c = request_.costs.Stage(StageId(s));
      figures.insert(figures.end(), {c.forward, c.backward, c.backward_input, c.backward_weight});
      if (!stages_.IsLast(StageId(s))) {
        figures.push_back(request_.costs.TransferTime(StageId(s), StageId(s + 1)));
        figures.push_back(request_.costs.TransferTime(StageId(s + 1), StageId(s)));
        figures.push_back(request_.costs.ReceiveOverhead(StageId(s), StageId(s + 1)));
        figures.push_back(request_.costs.ReceiveOverhead(StageId(s + 1), StageId(s)));
      }
    }
    return figures;
  }

  std::vector<double> MemoryFigures() const {
    const MemoryChangeTable changes = Changes();
    std::vector<double> figures;
    for (int s = 0; s < stages_.num_stages(); ++s) {
      for (const ActionKind kind : {ActionKind::kForward, ActionKind::kBackward,
                                    ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
        const Action part = MakeCompute(kind, StageId(s), MicrobatchId(0));
        figures.push_back(std::abs(changes.OwnChange(part)));
        figures.push_back(changes.Transient(part));
      }
      figures.push_back(changes.HandedTo(StageId(s)));
    }
    const StageMap map(request_.topology);
    for (int r = 0; r < request_.topology.ranks; ++r) {
      figures.push_back(request_.memory.StaticOf(RankId(r), map));
    }
    if (request_.memory.limit.has_value()) figures.push_back(*request_.memory.limit);
    return figures;
  }

  MemoryChangeTable Changes() const { return {request_.memory, request_.topology}; }

  int AddOp(ActionKind kind, StageId stage, MicrobatchId mb) {
    SolverOp op;
    op.action = MakeCompute(kind, stage, mb);
    op.rank = stages_.RankOf(stage).value;
    op.duration = Nearest(request_.costs.ComputeTime(op.action), time_.factor);
    out_.ops.push_back(op);
    return static_cast<int>(out_.ops.size()) - 1;
  }

  // Producers before consumers: every F by stage, then I/B from the last stage down, then W.
  void AddOps() {
    const int stages = stages_.num_stages();
    const int microbatches = request_.topology.microbatches;
    const ActionKind backward = split_ ? ActionKind::kBackwardInput : ActionKind::kBackward;
    for (int m = 0; m < microbatches; ++m) {
      for (int s = 0; s < stages; ++s) {
        parts_.At(StageId(s), MicrobatchId(m)).forward =
            AddOp(ActionKind::kForward, StageId(s), MicrobatchId(m));
      }
    }
    for (int m = 0; m < microbatches; ++m) {
      for (int s = stages - 1; s >= 0; --s) {
        parts_.At(StageId(s), MicrobatchId(m)).backward =
            AddOp(backward, StageId(s), MicrobatchId(m));
      }
    }
    if (!split_) return;
    for (int m = 0; m < microbatches; ++m) {
      for (int s = 0; s < stages; ++s) {
        parts_.At(StageId(s), MicrobatchId(m)).weight =
            AddOp(ActionKind::kBackwardWeight, StageId(s), MicrobatchId(m));
      }
    }
  }

  // `consumer` takes the output of `producer` (on stage `from`): across ranks after the
  // transfer, and with the receive's overhead as idle time before it.
  void AddInput(int producer, StageId from, int consumer, StageId to) {
    SolverOp& op = out_.ops[consumer];
    int64_t delay = 0;
    if (stages_.RankOf(from) != stages_.RankOf(to)) {
      delay = Nearest(request_.costs.TransferTime(from, to), time_.factor);
      op.setup =
          std::max(op.setup, Nearest(request_.costs.ReceiveOverhead(from, to), time_.factor));
    }
    out_.precedences.push_back({producer, consumer, delay});
  }

  void AddPrecedences() {
    const int microbatches = request_.topology.microbatches;
    for (int m = 0; m < microbatches; ++m) {
      for (int s = 0; s < stages_.num_stages(); ++s) {
        const StageId stage(s);
        const PartOps& ops = parts_.At(stage, MicrobatchId(m));
        if (!stages_.IsFirst(stage)) {
          AddInput(parts_.At(StageId(s - 1), MicrobatchId(m)).forward, StageId(s - 1), ops.forward,
                   stage);
        }
        out_.precedences.push_back({ops.forward, ops.backward, 0});
        if (!stages_.IsLast(stage)) {
          AddInput(parts_.At(StageId(s + 1), MicrobatchId(m)).backward, StageId(s + 1),
                   ops.backward, stage);
        }
        if (split_) out_.precedences.push_back({ops.backward, ops.weight, 0});
      }
    }
    // Microbatches are alike, so some optimum runs the first stage's forwards in order.
    for (int m = 0; m + 1 < microbatches; ++m) {
      out_.precedences.push_back({parts_.At(StageId(0), MicrobatchId(m)).forward,
                                  parts_.At(StageId(0), MicrobatchId(m + 1)).forward, 0});
    }
  }

  void AddHold(int rank, int from, int to, double amount) {
    const int64_t scaled = Up(amount, memory_.factor);
    if (scaled > 0) out_.holds.push_back({rank, from, to, scaled});
  }

  // What MemoryModel::Change releases at an op's end is held from the F's start until then;
  // what the backward leaves (retained: its input gradient) until the previous stage's
  // backward ends, which frees it on the same rank (MemoryChangeTable::HandedTo) and on another
  // has received it by then (the simulator frees a sent gradient at its rank's first op once it
  // landed, never later than this); a transient during its op.
  void AddHolds() {
    const MemoryChangeTable changes = Changes();
    for (int s = 0; s < stages_.num_stages(); ++s) {
      const int rank = stages_.RankOf(StageId(s)).value;
      for (int m = 0; m < request_.topology.microbatches; ++m) {
        const PartOps& ops = parts_.At(StageId(s), MicrobatchId(m));
        double kept = changes.OwnChange(out_.ops[ops.forward].action);
        for (const int released : {ops.backward, ops.weight}) {
          if (released < 0) continue;
          const double freed = -changes.OwnChange(out_.ops[released].action);
          AddHold(rank, ops.forward, released, freed);
          kept -= freed;
        }
        AddHold(rank, ops.forward, s > 0 ? parts_.At(StageId(s - 1), MicrobatchId(m)).backward : -1,
                kept);
        for (const int op : {ops.forward, ops.backward, ops.weight}) {
          if (op >= 0) AddHold(rank, op, op, changes.Transient(out_.ops[op].action));
        }
      }
    }
  }

  void AddMemoryLimit() {
    const MemoryModel& memory = request_.memory;
    const StageMap map(request_.topology);
    for (int r = 0; r < request_.topology.ranks; ++r) {
      out_.static_memory.push_back(Up(memory.StaticOf(RankId(r), map), memory_.factor));
    }
    if (!memory.limit.has_value()) return;
    std::vector<int64_t> capacity;
    capacity.reserve(static_cast<size_t>(request_.topology.ranks));
    for (int r = 0; r < request_.topology.ranks; ++r) {
      capacity.push_back(Down(*memory.limit - memory.StaticOf(RankId(r), map), memory_.factor));
    }
    out_.capacity = std::move(capacity);
  }

  const PlanRequest& request_;
  StageMap stages_;
  bool split_;
  StageMbTable<PartOps> parts_;
  Scale time_;
  Scale memory_;
  SolverInstance out_;
};

// Op `op` of the instance run for `microbatch`, starting at `start`. Listed microbatch by
// microbatch, each in instance order (producers first), which breaks ties.
struct PlacedOp {
  int64_t start = 0;
  int op = 0;
  int microbatch = 0;
};

ComputeOrder OrderOfPlaced(const SolverInstance& instance, std::vector<PlacedOp> placed) {
  auto end = [&](const PlacedOp& p) { return p.start + instance.ops[p.op].duration; };
  std::stable_sort(placed.begin(), placed.end(), [&](const PlacedOp& a, const PlacedOp& b) {
    return std::make_tuple(a.start, end(a)) < std::make_tuple(b.start, end(b));
  });
  ComputeOrder order(static_cast<size_t>(instance.ranks));
  for (const PlacedOp& p : placed) {
    const SolverOp& op = instance.ops[p.op];
    order[op.rank].push_back(
        MakeCompute(op.action.kind, op.action.stage, MicrobatchId(p.microbatch)));
  }
  return order;
}

}  // namespace

StatusOr<SolverInstance> BuildSolverInstance(const PlanRequest& request) {
  const OptimalStrategy* optimal = FindOptimalStrategy(request.strategy);
  if (optimal == nullptr) {
    return InvalidArgument("'" + request.strategy + "' is not a solver-made strategy");
  }
  return InstanceBuilder(request, optimal->split_backward).Build();
}

ComputeOrder OrderFromStarts(const SolverInstance& instance, const std::vector<int64_t>& starts) {
  std::vector<PlacedOp> placed;
  placed.reserve(instance.ops.size());
  for (size_t i = 0; i < instance.ops.size(); ++i) {
    const Action& action = instance.ops[i].action;
    placed.push_back({starts[i], static_cast<int>(i), action.microbatch.value});
  }
  return OrderOfPlaced(instance, std::move(placed));
}

ComputeOrder PeriodicOrder(const SolverInstance& instance, const std::vector<int64_t>& starts,
                           int64_t period, int microbatches) {
  std::vector<PlacedOp> placed;
  placed.reserve(instance.ops.size() * static_cast<size_t>(microbatches));
  for (int m = 0; m < microbatches; ++m) {
    for (size_t i = 0; i < instance.ops.size(); ++i) {
      placed.push_back({starts[i] + m * period, static_cast<int>(i), m});
    }
  }
  return OrderOfPlaced(instance, std::move(placed));
}

}  // namespace pipeplan
