// A catalogue strategy's request in, validated plan out (generate, insert comm, validate,
// check memory), and plans of given orders and programs. Pure: no I/O, clocks or printing.
// Front ends come in through MakePlan (make_plan.h), which also searches and solves.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {

// The version written into every plan's provenance.
std::string_view ToolVersion();

// Whether the request's costs or memory have an entry per stage or per boundary. Such figures
// hold for the request's own V; uniform ones describe what the request's `figures` says (a
// stage, or a rank's share, which Normalize and ShareAtStages split over the stages of the V
// planned: SplitRankShare).
bool HasPerStageFigures(const PlanRequest& request);

// `request` with the smallest memory limit its strategy can plan under, for the strategies
// that plan under a limit (zb, zbv: a lower one finds them no order), or with no limit (the
// others' orders do not depend on it). Fails where the strategy cannot plan the request.
StatusOr<PlanRequest> AtSmallestLimit(PlanRequest request);

// The limits above the request's own that its strategy also orders under when it plans under
// a memory limit of its own (zb, zbv, ...), each plan checked against the request's limit:
// raised by a quarter of a stage activation at a time, then by doubling activations, then
// +infinity (none). Empty where none is tried: a strategy that ignores the limit, no limit or
// options.order_limit given, or static memory every rank's (the strategy's count is then
// exact, and a raise would only plan above the limit). auto lists each as a candidate with
// options.order_limit set; BuildAndSimulatePlan tries them all and keeps the fastest.
StatusOr<std::vector<double>> OrderLimitsAbove(const PlanRequest& request);

// The strategy name that asks MakePlan to search (see auto_search.h).
inline constexpr std::string_view kAutoStrategy = "auto";

// A plan and its simulated timeline under the request's own costs and memory model, handed on
// as one: whoever needs the timeline of a plan made here takes it, never simulates the plan
// again (SimulationCount checks it).
struct Evaluated {
  Plan plan;
  Timeline timeline;
  // What the planner estimated for it (Normalize's notes: figures cut by depth, static
  // memory taken as the largest measured), in words for the user.
  std::vector<std::string> notes = {};
};

// A catalogue strategy's plan and its timeline: the simulation the memory limit's check runs,
// or one from the list schedule comm insertion ran anyway. auto and the solver-made strategies
// are refused: MakePlan (make_plan.h), the way in for every strategy, plans them.
StatusOr<Evaluated> BuildAndSimulatePlan(const PlanRequest& request);

// What a dual plan's step holds beyond its actions, which neither its simulation nor a
// measured timeline counts: DualPipe ends each step by summing the two model copies'
// gradients. nullopt for any other plan. MakePlan and partition note it.
std::optional<std::string> StepEndNote(const Plan& plan);
// BuildAndSimulatePlan's plan alone.
StatusOr<Plan> BuildPlan(const PlanRequest& request);

// For imported orders: runs comm insertion and validation on a given compute order.
StatusOr<Plan> BuildPlanFromOrder(const PlanRequest& request, ComputeOrder order);
// BuildPlanFromOrder with the plan's timeline.
StatusOr<Evaluated> EvaluateOrder(const PlanRequest& request, ComputeOrder order);

// For imported programs that already hold their transfers (a job's executed order): the plan
// as given, after every check an imported plan file gets (structure and the dry run).
StatusOr<Plan> BuildPlanFromPrograms(const PlanRequest& request, std::vector<RankProgram> programs);

}  // namespace pipeplan
