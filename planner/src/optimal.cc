#include "pipeplan/planner/optimal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/memory_tracker.h"
#include "pipeplan/simulation/simulator.h"
#include "pipeplan/strategies/strategy.h"
#include "solver_figures.h"

namespace pipeplan {

const std::vector<OptimalStrategy>& OptimalStrategies() {
  static const std::vector<OptimalStrategy> kStrategies = {
      {"optimal", "solver-made, I and W split, stage s on rank s % P (CP-SAT, within a time limit)",
       Placement::kLoop, 1, 0, true},
      {"optimal-v", "solver-made, I and W split, V shape (ZB-V's placement)", Placement::kVShape, 2,
       2, true},
      {"optimal-fb", "solver-made, B whole (no I/W split), stage s on rank s % P", Placement::kLoop,
       1, 0, false},
  };
  return kStrategies;
}

const OptimalStrategy* FindOptimalStrategy(std::string_view name) {
  for (const OptimalStrategy& strategy : OptimalStrategies()) {
    if (strategy.name == name) return &strategy;
  }
  return nullptr;
}

namespace {

using solver::Nearest;
using solver::OpsPerMicrobatch;
using solver::Up;

// A plan of the catalogue for the request, as an order of the optimal strategy's own kinds.
struct Candidate {
  std::string name;
  Plan plan;
  Timeline timeline;
};

// The compute order of `plan` in the kinds of `optimal`: a B becomes I then W when the
// strategy splits; nullopt when the plan cannot be said that way (overlap cells, or I and W
// where B must stay whole).
std::optional<ComputeOrder> OrderInKinds(const Plan& plan, const OptimalStrategy& optimal) {
  ComputeOrder order(plan.programs.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    for (const Action& action : plan.programs[r].actions) {
      if (!IsCompute(action.kind)) continue;
      if (action.kind == ActionKind::kOverlapFB) return std::nullopt;
      const bool split =
          action.kind == ActionKind::kBackwardInput || action.kind == ActionKind::kBackwardWeight;
      if (split && !optimal.split_backward) return std::nullopt;
      if (action.kind == ActionKind::kBackward && optimal.split_backward) {
        order[r].push_back(
            MakeCompute(ActionKind::kBackwardInput, action.stage, action.microbatch));
        order[r].push_back(
            MakeCompute(ActionKind::kBackwardWeight, action.stage, action.microbatch));
        continue;
      }
      order[r].push_back(action);
    }
  }
  return order;
}

StatusOr<Candidate> PlanOrder(const PlanRequest& request, ComputeOrder order, std::string name) {
  Candidate candidate;
  candidate.name = std::move(name);
  PIPEPLAN_ASSIGN_OR_RETURN(Evaluated planned, EvaluateOrder(request, std::move(order)));
  candidate.plan = std::move(planned.plan);
  candidate.timeline = std::move(planned.timeline);
  return candidate;
}

// A catalogue strategy's order, said in the optimal strategy's kinds and planned again, and the
// smallest memory limit under which it plans (what --memory-limit must be for it).
struct HeuristicOrder {
  Candidate candidate;
  double limit_needed = 0.0;
};

// Each catalogue strategy with the optimal one's placement that plans `request`, in catalogue
// order. `smallest`: each plans under the smallest limit it can, not the request's own.
std::vector<HeuristicOrder> HeuristicOrders(const PlanRequest& request,
                                            const OptimalStrategy& optimal, bool smallest) {
  std::vector<HeuristicOrder> out;
  for (const Strategy& strategy : AllStrategies()) {
    if (strategy.placement != optimal.placement) continue;
    if (!CheckApplicable(strategy, request.topology).ok()) continue;
    PlanRequest heuristic = request;
    heuristic.strategy = std::string(strategy.name);
    if (smallest) {
      StatusOr<PlanRequest> least = AtSmallestLimit(std::move(heuristic));
      if (!least.ok()) continue;
      heuristic = *std::move(least);
    }
    const StatusOr<Plan> plan = BuildPlan(heuristic);
    if (!plan.ok()) continue;
    std::optional<ComputeOrder> order = OrderInKinds(*plan, optimal);
    if (!order.has_value()) continue;
    PlanRequest again = request;
    if (smallest) again.memory.limit.reset();
    StatusOr<Candidate> candidate = PlanOrder(again, *std::move(order), std::string(strategy.name));
    if (!candidate.ok()) continue;
    const double needed =
        std::max(heuristic.memory.limit.value_or(0.0), PeakMemory(candidate->timeline));
    out.push_back({*std::move(candidate), needed});
  }
  return out;
}

// The fastest of HeuristicOrders under the request's limit (ties: catalogue order); nullopt
// when none plans the request.
std::optional<Candidate> BestHeuristic(const PlanRequest& request, const OptimalStrategy& optimal) {
  std::optional<Candidate> best;
  for (HeuristicOrder& made : HeuristicOrders(request, optimal, /*smallest=*/false)) {
    if (!best.has_value() ||
        made.candidate.timeline.metrics.makespan < best->timeline.metrics.makespan) {
      best = std::move(made.candidate);
    }
  }
  return best;
}

// The one of HeuristicOrders that needs the smallest limit (ties: catalogue order).
std::optional<HeuristicOrder> SmallestHeuristic(const PlanRequest& request,
                                                const OptimalStrategy& optimal) {
  std::optional<HeuristicOrder> smallest;
  for (HeuristicOrder& made : HeuristicOrders(request, optimal, /*smallest=*/true)) {
    if (!smallest.has_value() || made.limit_needed < smallest->limit_needed) {
      smallest = std::move(made);
    }
  }
  return smallest;
}

// When a candidate's plan starts each of its compute parts.
class PartStarts {
 public:
  explicit PartStarts(const Candidate& candidate) {
    for (size_t r = 0; r < candidate.plan.programs.size(); ++r) {
      const auto& actions = candidate.plan.programs[r].actions;
      for (size_t i = 0; i < actions.size(); ++i) {
        if (IsCompute(actions[i].kind)) {
          starts_[Key(actions[i])] = candidate.timeline.ranks[r].actions[i].start;
        }
      }
    }
  }

  // nullopt when the plan has no such part.
  std::optional<double> At(const Action& part) const {
    const auto found = starts_.find(Key(part));
    if (found == starts_.end()) return std::nullopt;
    return found->second;
  }

 private:
  using PartKey = std::tuple<ActionKind, int, int>;
  static PartKey Key(const Action& a) { return {a.kind, a.stage.value, a.microbatch.value}; }
  std::map<PartKey, double> starts_;
};

// The heuristic's start times as the solver's hint (op by op), in scaled units.
std::vector<int64_t> HintFrom(const Candidate& candidate, const SolverInstance& instance) {
  const PartStarts starts(candidate);
  std::vector<int64_t> hint(instance.ops.size(), 0);
  for (size_t i = 0; i < instance.ops.size(); ++i) {
    hint[i] = Nearest(starts.At(instance.ops[i].action).value_or(0.0), instance.time_scale);
  }
  return hint;
}

// The heuristic's steady state as a hint for a periodic instance (one microbatch's ops): the
// ops of the middle microbatch relative to its first forward, and the spacing of first
// forwards over a quarter of the microbatches after it. Unset when M < 2.
void SetPeriodicHint(const Candidate& candidate, SolverInstance& one, int microbatches) {
  if (microbatches < 2) return;
  const PartStarts starts(candidate);
  const int middle = (microbatches - 1) / 2;
  const int later = std::max(1, microbatches / 4);
  const auto first_forward = [&](int m) {
    return starts.At(MakeCompute(ActionKind::kForward, StageId(0), MicrobatchId(m)));
  };
  const std::optional<double> base = first_forward(middle);
  const std::optional<double> next = first_forward(middle + later);
  if (!base.has_value() || !next.has_value()) return;
  std::vector<int64_t> hint;
  for (const SolverOp& op : one.ops) {
    const Action part = MakeCompute(op.action.kind, op.action.stage, MicrobatchId(middle));
    const std::optional<double> start = starts.At(part);
    if (!start.has_value()) return;
    hint.push_back(std::max<int64_t>(0, Nearest(*start - *base, one.time_scale)));
  }
  one.hint = std::move(hint);
  one.hint_period = std::max<int64_t>(1, Up((*next - *base) / later, one.time_scale));
}

std::string Percent(double fraction) {
  return FormatNumber(std::round(fraction * 10000) / 100) + "%";
}

// The certificate of a plan of makespan `makespan` given the solver's proven bound.
std::string Certificate(double makespan, double bound, bool proven) {
  if (!proven) return "feasible, no proven bound";
  if (makespan <= bound * (1 + 1e-12)) return "optimal";
  const double gap = makespan / bound - 1;
  return "feasible, gap " + (gap < 1e-4 ? std::string("< 0.01%") : Percent(gap)) +
         " to the proven bound";
}

bool Solved(const SolverOutcome& outcome) {
  return outcome.result == SolverOutcome::Result::kOptimal ||
         outcome.result == SolverOutcome::Result::kFeasible;
}

// When the solver found nothing under the limit: the smallest limit an order is known to fit
// (the catalogue's smallest, or the one of a second solve that minimizes memory, started from
// it, when that needs less), and what the solver proved: nothing fits at the limit, or below
// its bound. The solver counts a received message from its consumer's start, the simulation
// from where the rank posts the receive (docs/planning.md, section 2), so the orders are
// judged as simulated.
Status NothingFits(const PlanRequest& request, SolverInstance instance, const SolveFn& solve) {
  const MemoryModel& memory = request.memory;
  const double limit = *memory.limit;
  const std::string base =
      "nothing fits the memory limit " + memory.Describe(limit) + " with " + request.strategy;
  const OptimalStrategy* optimal = FindOptimalStrategy(request.strategy);
  std::optional<HeuristicOrder> smallest;
  if (optimal != nullptr) smallest = SmallestHeuristic(request, *optimal);
  instance.minimize_memory = true;
  instance.capacity.reset();
  instance.hint.clear();
  if (smallest.has_value()) instance.hint = HintFrom(smallest->candidate, instance);
  const StatusOr<SolverOutcome> least = solve(instance);
  const bool solved = least.ok() && Solved(*least);
  if (solved && least->starts.size() == instance.ops.size()) {
    PlanRequest unlimited = request;
    unlimited.memory.limit.reset();
    StatusOr<Candidate> made =
        PlanOrder(unlimited, OrderFromStarts(instance, least->starts), "the solver");
    const double needed = made.ok() ? PeakMemory(made->timeline) : 0.0;
    if (made.ok() && (!smallest.has_value() || needed < smallest->limit_needed * (1 - 1e-12))) {
      smallest = HeuristicOrder{*std::move(made), needed};
    }
  }
  if (!smallest.has_value()) {
    return FailedPrecondition(base +
                              " (no strategy of the catalogue plans the request, and the solver "
                              "found no order in its time)");
  }
  if (solved && least->result == SolverOutcome::Result::kOptimal && instance.exact &&
      smallest->limit_needed <=
          static_cast<double>(least->objective) / instance.memory_scale * (1 + 1e-12)) {
    return FailedPrecondition(base + "; the smallest limit any order fits is " +
                              memory.Describe(smallest->limit_needed) + " (proven by the solver)");
  }
  const double bound = solved ? static_cast<double>(least->bound) / instance.memory_scale : limit;
  const std::string below = bound > limit ? "none fits below " + memory.Describe(bound)
                                          : "none fits at or below " + memory.Describe(limit);
  return FailedPrecondition(
      base + "; the smallest limit known to fit is " + memory.Describe(smallest->limit_needed) +
      " (" + smallest->candidate.name + "'s order), and " + below +
      (instance.exact ? " (proven by the solver)"
                      : " as the solver counts it (its figures rounded, so not a proof)"));
}

// What one solve gave: the solver's answer and, when it found one, the order it makes.
struct SolverAnswer {
  SolverInstance instance;
  SolverOutcome outcome;
  std::optional<ComputeOrder> order;
};

// A whole-step solve of a long steady state (M >= 4P) starts from a periodic plan when that
// is faster than the heuristic: under tight memory the heuristics are far from the optimum and
// CP-SAT rarely improves on them in its budget (P=8, M=128, limit 4, unit costs: zb's 1287
// stood after 30 s; the periodic plan is 649). The periodic solve gets this share of the
// budget.
constexpr double kPeriodicShare = 0.25;
constexpr std::string_view kPeriodicStart = "periodic";

bool UsePeriodicWarmStart(const Topology& t) { return t.microbatches >= 4 * t.ranks; }

// Starts no later than any op of a valid answer can start, nor earlier than 0 (a steady
// state's op may start a period per op past the one-microbatch horizon; its period is at most
// that horizon): a result file that says otherwise is not the solver's answer to this
// instance, and its figures must not overflow the order's arithmetic.
Status CheckWithinHorizon(const SolverInstance& instance, const SolverOutcome& outcome) {
  const bool periodic = instance.period_microbatches > 0;
  const int64_t ops = static_cast<int64_t>(instance.ops.size());
  const int64_t latest = periodic ? instance.horizon * (ops + 1) : instance.horizon;
  for (size_t i = 0; i < outcome.starts.size(); ++i) {
    if (outcome.starts[i] < 0 || outcome.starts[i] > latest) {
      return Internal("the solver returned start " + std::to_string(outcome.starts[i]) +
                      " for op " + std::to_string(i) + ", outside [0, " + std::to_string(latest) +
                      "]");
    }
  }
  if (periodic && outcome.period > instance.horizon) {
    return Internal("the solver returned period " + std::to_string(outcome.period) +
                    ", past the horizon " + std::to_string(instance.horizon));
  }
  return Status::Ok();
}

StatusOr<SolverAnswer> SolveWhole(const PlanRequest& request, const OptimalOptions& options,
                                  const std::optional<Candidate>& heuristic, const SolveFn& solve) {
  SolverAnswer answer;
  PIPEPLAN_ASSIGN_OR_RETURN(answer.instance, BuildSolverInstance(request));
  answer.instance.time_limit_s = options.time_limit_s;
  answer.instance.workers = options.workers;
  if (heuristic.has_value()) answer.instance.hint = HintFrom(*heuristic, answer.instance);
  PIPEPLAN_ASSIGN_OR_RETURN(answer.outcome, solve(answer.instance));
  if (answer.outcome.result == SolverOutcome::Result::kInfeasible) {
    // Rounded figures can make the solver's count stricter than the simulation's; an order
    // that fits as simulated then stands.
    if (heuristic.has_value()) return answer;
    if (request.memory.limit.has_value()) return NothingFits(request, answer.instance, solve);
    return Internal("the solver found no order for " + request.strategy +
                    " although no memory limit was given");
  }
  if (!Solved(answer.outcome)) return answer;
  if (answer.outcome.starts.size() != answer.instance.ops.size()) {
    return Internal("the solver returned " + std::to_string(answer.outcome.starts.size()) +
                    " start times for " + std::to_string(answer.instance.ops.size()) + " ops");
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckWithinHorizon(answer.instance, answer.outcome));
  answer.order = OrderFromStarts(answer.instance, answer.outcome.starts);
  return answer;
}

// One microbatch's ops, solved as a steady state that repeats every period for the request's
// M microbatches.
StatusOr<SolverAnswer> SolvePeriodic(const PlanRequest& request, const OptimalOptions& options,
                                     const std::optional<Candidate>& heuristic,
                                     const SolveFn& solve) {
  PlanRequest one = request;
  one.topology.microbatches = 1;
  SolverAnswer answer;
  PIPEPLAN_ASSIGN_OR_RETURN(answer.instance, BuildSolverInstance(one));
  answer.instance.time_limit_s = options.time_limit_s;
  answer.instance.workers = options.workers;
  answer.instance.period_microbatches = request.topology.microbatches;
  if (heuristic.has_value()) {
    SetPeriodicHint(*heuristic, answer.instance, request.topology.microbatches);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(answer.outcome, solve(answer.instance));
  if (answer.outcome.result == SolverOutcome::Result::kInfeasible && !heuristic.has_value()) {
    if (!request.memory.limit.has_value()) {
      return Internal("the solver found no steady state for " + request.strategy +
                      " although no memory limit was given");
    }
    return FailedPrecondition(
        "nothing fits the memory limit " + request.memory.Describe(*request.memory.limit) +
        " with " + request.strategy +
        " as a periodic schedule, not even one microbatch at a time (what is held until the "
        "step ends counts for all " +
        std::to_string(request.topology.microbatches) +
        " microbatches); fewer microbatches let the whole-step solve name the smallest limit");
  }
  if (!Solved(answer.outcome)) return answer;
  if (answer.outcome.starts.size() != answer.instance.ops.size() || answer.outcome.period <= 0) {
    return Internal("the solver returned a periodic answer with " +
                    std::to_string(answer.outcome.starts.size()) + " start times for " +
                    std::to_string(answer.instance.ops.size()) + " ops and period " +
                    std::to_string(answer.outcome.period));
  }
  PIPEPLAN_RETURN_IF_ERROR(CheckWithinHorizon(answer.instance, answer.outcome));
  answer.order = PeriodicOrder(answer.instance, answer.outcome.starts, answer.outcome.period,
                               request.topology.microbatches);
  return answer;
}

bool PeriodProven(const SolverAnswer& answer) {
  return answer.outcome.period_proven && answer.instance.exact;
}

// What a periodic solve claims: the period it found, and whether any period is shorter. It
// claims no bound for the whole step.
std::string PeriodicVerdict(const SolverAnswer& answer, int microbatches) {
  const std::string head = "periodic (" + std::to_string(microbatches) + " microbatches)";
  if (!answer.order.has_value()) return head + ": the solver found no steady state";
  const double period = static_cast<double>(answer.outcome.period) / answer.instance.time_scale;
  std::string out = head + ": one microbatch every " + FormatNumber(period);
  out += PeriodProven(answer) ? ", the shortest any steady state has (the busiest rank's work)"
                              : ", the shortest the solver found";
  return out + "; no proven bound for the whole step";
}

}  // namespace

StatusOr<OptimalPlan> BuildOptimalPlan(const PlanRequest& raw_request,
                                       const OptimalOptions& options, const SolveFn& solve) {
  if (!(options.time_limit_s > 0) || !std::isfinite(options.time_limit_s)) {
    return InvalidArgument("time_limit_s must be a number of seconds > 0, got " +
                           FormatNumber(options.time_limit_s));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(NormalizedRequest normalized, Normalize(raw_request));
  const PlanRequest& request = normalized.request;
  const OptimalStrategy* optimal = FindOptimalStrategy(request.strategy);
  if (optimal == nullptr) {
    return InvalidArgument("'" + request.strategy + "' is not a solver-made strategy");
  }
  const Topology& t = request.topology;
  const int64_t per_microbatch = OpsPerMicrobatch(t, optimal->split_backward);
  const bool periodic = options.periodic || per_microbatch * t.microbatches > kMaxSolverOps;
  PIPEPLAN_RETURN_IF_ERROR(solver::CheckSolverSize(t, optimal->split_backward, periodic));
  const std::optional<Candidate> heuristic = BestHeuristic(request, *optimal);
  std::optional<Candidate> best = heuristic;
  bool improved = false;  // the plan is the solver's, strictly faster than the heuristic
  const auto consider = [&](StatusOr<Candidate> made) {
    if (made.ok() &&
        (!best.has_value() || made->timeline.metrics.makespan < best->timeline.metrics.makespan)) {
      improved = heuristic.has_value();
      best = *std::move(made);
    }
  };
  OptimalOptions whole = options;
  bool clocked = false;  // a clock cap, not the deterministic budget, ended a search
  if (!periodic && UsePeriodicWarmStart(t)) {
    OptimalOptions steady = options;
    steady.time_limit_s = options.time_limit_s * kPeriodicShare;
    whole.time_limit_s = options.time_limit_s - steady.time_limit_s;
    // A failure here (nothing fits, no solver) is the whole-step solve's to report.
    const StatusOr<SolverAnswer> answer = SolvePeriodic(request, steady, heuristic, solve);
    if (answer.ok() && answer->order.has_value()) {
      consider(PlanOrder(request, *answer->order, std::string(kPeriodicStart)));
      clocked = answer->outcome.stopped_by_clock;
    }
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const SolverAnswer answer,
                            periodic ? SolvePeriodic(request, options, heuristic, solve)
                                     : SolveWhole(request, whole, best, solve));
  if (answer.order.has_value()) {
    StatusOr<Candidate> made = PlanOrder(request, *answer.order, request.strategy);
    // Rounded figures can make the solver's order miss the limit by a rounding; the heuristic
    // (if any) then stands.
    if (!made.ok() && !best.has_value()) return made.status();
    consider(std::move(made));
  }
  if (!best.has_value()) {
    return DeadlineExceeded("the solver found no order for " + request.strategy + " in " +
                            FormatNumber(options.time_limit_s) +
                            " s and no strategy of the catalogue plans this request "
                            "(raise time_limit_s)");
  }

  OptimalPlan out;
  out.notes = std::move(normalized.notes);
  if (heuristic.has_value()) {
    out.best_heuristic = heuristic->name;
    out.best_heuristic_makespan = heuristic->timeline.metrics.makespan;
  }
  out.solver_improved = improved;
  const std::string best_name = best->name;
  out.plan = std::move(best->plan);
  out.timeline = std::move(best->timeline);
  out.plan.request.strategy = request.strategy;
  out.plan.provenance.strategy = request.strategy;
  const double makespan = out.timeline.metrics.makespan;
  std::string& status = out.plan.provenance.solver_status;
  if (periodic) {
    status = PeriodicVerdict(answer, t.microbatches);
    if (answer.order.has_value()) {
      out.period = static_cast<double>(answer.outcome.period) / answer.instance.time_scale;
      out.period_proven = PeriodProven(answer);
    }
  } else {
    const bool proven = answer.order.has_value() && answer.instance.exact;
    const double bound =
        proven ? static_cast<double>(answer.outcome.bound) / answer.instance.time_scale : 0.0;
    status = Certificate(makespan, bound, proven);
    out.plan.provenance.proven_bound = bound;
  }
  if (!improved && heuristic.has_value() && status != "optimal") {
    status += " (" + heuristic->name + "'s order; the solver found none faster)";
  } else if (best_name == kPeriodicStart && status != "optimal") {
    status += " (the periodic warm start's order; the whole-step search found none faster)";
  }
  if (clocked || answer.outcome.stopped_by_clock) {
    status += "; stopped by the clock cap on a loaded machine, so a rerun may differ";
  }
  // The proven bound is in the provenance now: the metrics' lower bound takes it.
  RefreshLowerBound(out.plan, out.timeline);
  return out;
}

namespace {

// The solver-made strategy that orders I and W apart for a placement and V (optimal for the
// loop, optimal-v for the V shape at V = 2), or nullptr (the dual placement has none).
const OptimalStrategy* SolverFor(Placement placement, int stages_per_rank) {
  for (const OptimalStrategy& strategy : OptimalStrategies()) {
    if (!strategy.split_backward || strategy.placement != placement) continue;
    if (stages_per_rank < strategy.min_stages_per_rank) continue;
    if (strategy.max_stages_per_rank > 0 && stages_per_rank > strategy.max_stages_per_rank) {
      continue;
    }
    return &strategy;
  }
  return nullptr;
}

}  // namespace

StatusOr<AutoOptimalResult> AutoSearchWithSolver(const PlanRequest& request,
                                                 const OptimalOptions& options,
                                                 const SolveFn& solve) {
  if (request.options.post_validation) {
    return InvalidArgument(
        "with_solver: the solver-made strategies insert no post-validation "
        "(options.post_validation); plan auto with it without the solver");
  }
  PIPEPLAN_ASSIGN_OR_RETURN(AutoResult found, AutoSearch(request));
  AutoOptimalResult out;
  out.heuristic = found.best.plan;
  out.heuristic_makespan = found.best.timeline.metrics.makespan;
  std::optional<Evaluated> fastest;  // a solver-made plan faster than auto's pick
  std::set<std::pair<Placement, int>> solved;
  for (const AutoCandidate& candidate : found.candidates) {
    if (!candidate.status.ok()) break;  // the feasible ones come first, fastest first
    const Strategy* strategy = FindStrategy(candidate.request.strategy);
    const int v = candidate.request.topology.stages_per_rank;
    if (strategy == nullptr || !solved.insert({strategy->placement, v}).second) continue;
    const OptimalStrategy* optimal = SolverFor(strategy->placement, v);
    if (optimal == nullptr) continue;
    PlanRequest solver_request = candidate.request;
    solver_request.strategy = std::string(optimal->name);
    solver_request.options.microbatch_group_size = 0;
    solver_request.options.order_limit.reset();  // zb's candidates order under other limits
    PIPEPLAN_ASSIGN_OR_RETURN(OptimalPlan made, BuildOptimalPlan(solver_request, options, solve));
    ++out.solved;
    const double to_beat =
        fastest.has_value() ? fastest->timeline.metrics.makespan : out.heuristic_makespan;
    if (made.timeline.metrics.makespan >= to_beat) continue;
    // The candidate's figures were fitted for it: its notes are the solver-made plan's.
    fastest = Evaluated{std::move(made.plan), std::move(made.timeline), candidate.notes};
    fastest->plan.provenance.strategy = "auto -> " + fastest->plan.request.strategy;
  }
  out.best = fastest.has_value() ? *std::move(fastest) : std::move(found.best);
  return out;
}

}  // namespace pipeplan
