// pipeplan plan: build a validated plan from a strategy and a cost model, or from a request
// file, and write it as protobuf (binary, text or JSON).
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "commands.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/plan_summary.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/make_plan.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan plan --strategy NAME --ranks P --microbatches M [options] [-o FILE]
       pipeplan plan --request FILE [-o FILE]

Builds a pipeline schedule (per-rank action lists with SEND/RECV inserted), validates it
and writes it as a protobuf plan.

Request:
  --strategy NAME              schedule to generate (see 'Strategies' below), or 'auto': the
                               fastest plan of every strategy and setting that fits the memory
                               limit; its pick is named on stderr; required
  --ranks P                    pipeline-parallel ranks, integer >= 1; required
  --microbatches M             microbatches per step, integer >= 1; required
  --stages-per-rank V          model stages per rank, integer >= 1 (default: the smallest V
                               the strategy accepts, the V column below)
  --microbatch-group-size G    interleaved-1f1b: microbatches per group, integer >= 1
                               (default: P; needs P <= G <= M and M % G == 0 or M % G >= P)
  --memory-limit X             per-rank limit on static + activation memory, number >= 0, in
                               the memory model's unit (by default microbatch activations of
                               one rank's share of the model: 1F1B peaks at P on rank 0), or
                               bytes with a unit where the cost file counts bytes: 70GiB,
                               512MiB, 2.5GB (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, any case);
                               the plan fails if it needs more (default: a cost file's own
                               limit, else none)
  --runtime NAME               the runtime that will run the plan: pipeplan-torch, torch
                               (torch.distributed.pipelining's _PipelineScheduleRuntime, which
                               loads 'pipeplan export --format torch-csv'), torchtitan or
                               megatron; only what it runs is planned (torch: no dual
                               placement, no post-validation, F&B cells cost F + B since it
                               runs their halves in turn, each receive posted when its data
                               is sent, since torch cannot start one before the compute ahead
                               of it ends; megatron: 1f1b, interleaved-1f1b and their overlap
                               variants). Default: any strategy
  --post-validation            zero-bubble family (zb, zb-1p, zb-2p, zb-h1, zb-h2,
                               interleaved-zb, zbv, zbv-handcrafted, v-half, v-min): insert the
                               optimizer post-validation (PV) on every rank and tag the receives
                               a failed validation must drain as rollback; other strategies
                               fail with exit 1 (with auto: only this family is searched)
  --time-limit SEC             optimal, optimal-v, optimal-fb, auto --optimal: how long the
                               solver may search (per solve), number > 0, in CP-SAT's
                               deterministic seconds (about a wall second each on 2 cores;
                               the same request gives the same plan); it stops earlier when it
                               proves the optimum and, on a terminal, reports its progress on
                               stderr every 5 s (default 60)
  --optimal                    auto: also plan the solver-made strategies (optimal for loop
                               placements, optimal-v for the V shape), each from the fastest
                               candidate of its placement and V, and keep the fastest plan of
                               all; one solve per placement and V (up to four)
  --periodic                   optimal, optimal-v, optimal-fb, auto --optimal: solve one
                               steady-state period (op i of microbatch m starts at x_i + m *
                               period), the shortest period first, then repeat it M times
                               with its own warm-up and cool-down: plans M = 256 in seconds,
                               with no proven bound for the whole step. Chosen by itself when
                               the whole step has over 4000 ops (3 x P x V x M with I/W split)
  --request FILE               take the whole request (topology, strategy, costs, memory)
                               from a text-format or JSON PlanRequest; excludes the flags above

Costs (durations per stage in your time unit, e.g. microseconds; numbers >= 0):
  --forward T                  F, forward of one microbatch on one stage (default 1)
  --backward T                 B, full backward (default I + W)
  --backward-input T           I, input-gradient half of the backward (default B - W, or B/2
                               when only B is given; 1 when nothing is given)
  --backward-weight T          W, weight-gradient half (default B - I, or B/2; 1 when nothing
                               is given)
  --overlap T                  one F&B overlap cell (a forward and a backward run together, as
                               in 1f1b-overlap, interleaved-1f1b-overlap, dualpipe, dualpipe-v);
                               number > 0 (default F + B of the cell's two halves)
  --comm T                     latency of one activation/gradient transfer between ranks
                               (default 0)
  --receive-overhead T         time a receive takes once posted even when its data is there
                               (LogP's overhead; 'pipeplan calibrate' measures it; default 0)
  --costs FILE                 a CostModel file (text, JSON or binary protobuf) instead of the
                               duration flags; allows per-stage and per-boundary costs

Output:
  -o, --output FILE            write the plan here; the format follows the extension: .pb or
                               .bin binary, .json JSON, anything else text format
                               (default: text format on standard output)
  -h, --help                   show this help

With --strategy auto the durations describe one rank's share of the model (as for
'pipeplan compare'), or one stage at --stages-per-rank V when V is given; each candidate gets
the share split over its own stages. --microbatch-group-size does not apply.

Strategies (run 'pipeplan compare' to see them side by side):
@STRATEGIES@

Examples:
  pipeplan plan --strategy 1f1b --ranks 4 --microbatches 8 -o plan.textproto
  pipeplan plan --strategy interleaved-1f1b --ranks 4 --stages-per-rank 2 --microbatches 8 \
      --forward 1 --backward 2 --comm 0.1 -o plan.pb
  pipeplan plan --strategy zb-h1 --ranks 8 --microbatches 24 --forward 18522 \
      --backward-input 18086 --backward-weight 9337 --comm 601 -o zb.json
  pipeplan plan --strategy zbv --ranks 4 --microbatches 8 --post-validation -o zbv.pb
  pipeplan plan --strategy 1f1b-overlap --ranks 4 --microbatches 8 --overlap 2.5 -o o.pb
  pipeplan plan --strategy auto --ranks 8 --microbatches 24 --memory-limit 8 -o best.pb
  pipeplan plan --strategy optimal --ranks 4 --microbatches 8 --memory-limit 3 \
      --time-limit 30 -o optimal.pb
  pipeplan plan --request request.textproto -o plan.pb

The solver-made strategies (optimal, optimal-v, optimal-fb) run OR-Tools' CP-SAT
(scripts/setup_solver.sh installs it), start from the best plan of the catalogue for the same
request, never return a slower one, and say on stderr and in the plan's provenance whether
the result is proven optimal or how far it may be from the optimum. F&B overlap cells are not
in their model.
)";

struct PlanCommandOptions {
  app::RequestFlags request;
  std::optional<std::string> output;
  std::optional<double> time_limit_s;
  bool periodic = false;
  bool optimal = false;  // auto: also the solver-made strategies
};

std::vector<app::FlagSpec> PlanFlags() {
  std::vector<app::FlagSpec> specs = {{"strategy"},
                                      {"request"},
                                      {"output", app::FlagKind::kValue, 'o'},
                                      {"time-limit"},
                                      {"periodic", app::FlagKind::kBool},
                                      {"optimal", app::FlagKind::kBool}};
  for (const app::FlagSpec& spec : app::TopologyFlagSpecs()) specs.push_back(spec);
  for (const app::FlagSpec& spec : app::CostFlagSpecs()) specs.push_back(spec);
  return specs;
}

StatusOr<PlanCommandOptions> ParsePlanOptions(const app::Flags& flags) {
  PIPEPLAN_RETURN_IF_ERROR(app::ExpectPositional(flags, 0, ""));
  PlanCommandOptions options;
  PIPEPLAN_ASSIGN_OR_RETURN(options.request,
                            app::ParseRequestFlags(flags, app::StrategyFlag::kRequired));
  options.output = flags.GetString("output");
  options.periodic = flags.GetBool("periodic");
  options.optimal = flags.GetBool("optimal");
  PIPEPLAN_ASSIGN_OR_RETURN(options.time_limit_s, app::ParseTimeLimitFlag(flags));
  return options;
}

// --time-limit and --periodic apply to what runs the solver; the planner checks --optimal.
Status CheckSolverFlags(const PlanRequest& request, const PlanCommandOptions& options) {
  const std::string& strategy = request.strategy;
  const bool solver_made = FindOptimalStrategy(strategy) != nullptr;
  const bool auto_with_solver = strategy == kAutoStrategy && options.optimal;
  for (const auto& [flag, given] :
       {std::pair<const char*, bool>{"--time-limit", options.time_limit_s.has_value()},
        {"--periodic", options.periodic}}) {
    if (given && !solver_made && !auto_with_solver) {
      return InvalidArgument(std::string(flag) +
                             " applies to optimal, optimal-v, optimal-fb and auto --optimal "
                             "only, not " +
                             strategy);
    }
  }
  return Status::Ok();
}

Status ExecutePlan(const PlanCommandOptions& options) {
  PIPEPLAN_ASSIGN_OR_RETURN(const PlanRequest request, app::LoadRequest(options.request));
  PIPEPLAN_RETURN_IF_ERROR(CheckSolverFlags(request, options));
  PlanOptions planning;
  planning.with_solver = options.optimal;
  planning.solver.time_limit_s = options.time_limit_s.value_or(planning.solver.time_limit_s);
  planning.solver.periodic = options.periodic;
  planning.solve = app::RunCpSat;
  StatusOr<Evaluated> made = MakePlan(request, planning);
  if (!made.ok()) return app::InFlagTerms(made.status(), options.request);
  const Plan& plan = made->plan;
  // How the plan was chosen, and what the planner estimated for it.
  for (const std::string& note : made->notes) app::PrintNote(note);
  const bool to_stdout = app::IsStandardOutput(options.output);
  const ProtoFormat format = app::OutputFormat(options.output);
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, SerializePlan(plan, format));
  PIPEPLAN_RETURN_IF_ERROR(app::WriteOutput(options.output, data));
  if (!to_stdout) {
    size_t actions = 0;
    for (const RankProgram& program : plan.programs) actions += program.actions.size();
    const Topology& t = plan.request.topology;
    std::cout << "wrote " << app::PlanStrategyName(plan) << " plan (P=" << t.ranks
              << " V=" << t.stages_per_rank << " M=" << t.microbatches << ", " << actions
              << " actions) to " << *options.output << "\n";
  }
  return Status::Ok();
}

}  // namespace

int RunPlanCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<PlanCommandOptions> kSpec = {"plan", kHelp, PlanFlags(),
                                                             ParsePlanOptions, ExecutePlan};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
