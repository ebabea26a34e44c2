// pipeplan partition: which layers each stage holds, with the strategy and V, from per-layer
// figures (a LayerCosts file), for the smallest simulated step that fits the memory limit.
#include <cmath>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/command.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/app/request_flags.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/split_layout.h"
#include "pipeplan/planner/auto_search.h"
#include "pipeplan/planner/partition.h"

namespace pipeplan::cli {
namespace {

constexpr std::string_view kHelp =
    R"(usage: pipeplan partition --layers FILE --ranks P --microbatches M [--strategy NAME|auto]
                           [--stages-per-rank V] [--memory-limit X] [--comm T]
                           [--runtime NAME] [-o PLAN] [--split FILE] [--json]

Chooses which layers each stage holds (contiguous, in model order), together with the
strategy and V, for the smallest simulated step whose every rank fits the memory limit.
Every split weighed is a real plan (the strategy's order, transfers and bytes), simulated.

The layers file (LayerCosts; binary, text or JSON protobuf) lists the model's layers in
order, each with its name (the module's FQN), its forward and its backward (backward, or
backward_input and backward_weight, or all three) in the file's time_unit, and optionally
its bytes: activation (kept per microbatch until its backward), freed_by_input,
parameter_bytes (static memory: times 1 + optimizer_multiple) and output_bytes (the message
to the next stage). For example:
  {"layers": [{"name": "tok_embeddings", "forward": 0.4, "backward": 0.8},
              {"name": "layers.0", "forward": 1.1, "backward_input": 1.2,
               "backward_weight": 1.0}, ...],
   "time_unit": "ms"}
A layer without I and W has them at B / 2 each, one without B has it at I + W: both are
marked assumed, and a pick that rests on them says so (the fastest candidate resting on
given figures alone is picked).

The search (docs/planning.md): per strategy and V, the even split and the split whose
largest stage (F + B) is smallest (exact), then steepest descent over the boundaries. With
auto, every strategy and V (1, 2, 4) the runtime runs is weighed at those two splits, and
the three best, with any within 5% of the best (and, under a limit, any above it at both
splits yet faster there than the best that fits), are searched. A searched candidate with
at most 2000 splits has every split weighed: its split is then the best there is for it.
Printed: each stage's layers and figures, the step and each rank's peak, and beside them
the even split (torchtitan's default) with the same strategy and with the best strategy on
it.

Options:
  --layers FILE         the per-layer figures (required)
  --ranks P             pipeline ranks (required)
  --microbatches M      microbatches per step (required)
  --strategy NAME       a catalogue strategy, or auto (default): every one
  --stages-per-rank V   only this V (default: 1, 2 and 4 where the strategy takes them)
  --memory-limit X      bytes per rank: 70GiB, 512MiB or a number of bytes; or one per
                        rank, comma-separated (40GiB,40GiB,38GiB,30GiB: e.g. no rank
                        above what the plan you run now holds); needs the layers' memory
                        figures
  --comm T              latency of each transfer between stages, in the file's unit
                        (default 0); the message's output_bytes ride on it
  --runtime NAME        only what this runtime executes: pipeplan-torch, torch,
                        torchtitan, megatron
  -o, --output PLAN     write the chosen plan (.pb binary, .json JSON, else text format)
  --split FILE          write the split as JSON for the runtimes: torchtitan's
                        module_fqns_per_model_part (a list per stage, in stage order) and
                        Megatron's pipeline_model_parallel_layout (E for a layer whose name
                        holds "emb", L for "norm", "output", "head" or "loss" after the
                        last other layer, t otherwise; null where the split puts E past
                        the first stage or L before the last)
  --json                print one JSON object instead of the tables
  -h, --help            show this help

Examples:
  pipeplan partition --layers layers.json --ranks 4 --microbatches 8
  pipeplan partition --layers layers.json --ranks 4 --microbatches 16 --strategy zbv \
      --memory-limit 40GiB -o plan.pb --split split.json
)";

struct PartitionOptions {
  std::string layers_path;
  PartitionRequest request;
  std::optional<std::string> output;
  std::optional<std::string> split_output;
  bool json = false;
};

StatusOr<int> RequiredInt(const app::Flags& flags, std::string_view name) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<int> value, flags.GetInt(name, 1));
  if (!value.has_value()) {
    return InvalidArgument("missing --" + std::string(name) + " (see --help)");
  }
  return *value;
}

StatusOr<PartitionOptions> ParsePartitionOptions(const app::Flags& flags) {
  PartitionOptions options;
  const std::optional<std::string> layers = flags.GetString("layers");
  if (!layers.has_value()) return InvalidArgument("missing --layers FILE (see --help)");
  options.layers_path = *layers;
  PartitionRequest& request = options.request;
  PIPEPLAN_ASSIGN_OR_RETURN(request.ranks, RequiredInt(flags, "ranks"));
  PIPEPLAN_ASSIGN_OR_RETURN(request.microbatches, RequiredInt(flags, "microbatches"));
  request.strategy = flags.GetString("strategy").value_or("auto");
  PIPEPLAN_ASSIGN_OR_RETURN(request.stages_per_rank, flags.GetInt("stages-per-rank", 1));
  if (const std::optional<std::string> limit = flags.GetString("memory-limit")) {
    PIPEPLAN_ASSIGN_OR_RETURN(request.memory_limits,
                              app::ParseMemoryLimits(*limit, "--memory-limit"));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::optional<double> comm, flags.GetNonNegativeDouble("comm"));
  request.link.latency = comm.value_or(0.0);
  if (const std::optional<std::string> runtime = flags.GetString("runtime")) {
    const std::optional<Runtime> parsed = RuntimeFromName(*runtime);
    if (!parsed.has_value()) {
      return InvalidArgument("--runtime: unknown runtime '" + *runtime + "' (one of " +
                             std::string(RuntimeNames()) + ")");
    }
    request.runtime = *parsed;
  }
  options.output = flags.GetString("output");
  options.split_output = flags.GetString("split");
  options.json = flags.GetBool("json");
  return options;
}

std::vector<double> PeaksOf(const Timeline& timeline) {
  std::vector<double> peaks;
  for (const RankTimeline& rank : timeline.ranks) peaks.push_back(rank.peak_memory);
  return peaks;
}

std::string RenderJson(const PartitionOptions& options, const PartitionResult& result) {
  const Evaluated& best = result.best.planned;
  std::ostringstream out;
  out << "{\"strategy\":" << app::JsonString(best.plan.request.strategy)
      << ",\"stages_per_rank\":" << best.plan.request.topology.stages_per_rank << ",\"stages\":"
      << LayerNamesJson(StageLayerNames(options.request.layers, result.best.split))
      << ",\"makespan\":" << app::JsonNumber(best.timeline.metrics.makespan)
      << ",\"peak_memory\":" << app::JsonArray(PeaksOf(best.timeline))
      << ",\"time_unit\":" << app::JsonString(options.request.layers.time_unit) << ",\"even\":";
  if (result.even_best.has_value()) {
    const Evaluated& even = result.even_best->planned;
    out << "{\"strategy\":" << app::JsonString(even.plan.request.strategy)
        << ",\"stages_per_rank\":" << even.plan.request.topology.stages_per_rank
        << ",\"makespan\":" << app::JsonNumber(even.timeline.metrics.makespan)
        << ",\"same_strategy_makespan\":"
        << (result.even_same.has_value()
                ? app::JsonNumber(result.even_same->planned.timeline.metrics.makespan)
                : "null")
        << "}";
  } else {
    out << "null";
  }
  out << ",\"plans_simulated\":" << result.evaluations
      << ",\"exhaustive\":" << result.candidates[result.pick].exhaustive << "}\n";
  return out.str();
}

std::string Cell(double value) { return app::FormatCompact(value); }

std::string RenderTables(const PartitionOptions& options, const PartitionResult& result) {
  const LayerCosts& layers = options.request.layers;
  const Evaluated& best = result.best.planned;
  const Plan& plan = best.plan;
  const std::string unit = layers.time_unit.empty() ? "" : " " + layers.time_unit;
  std::ostringstream out;
  const PartitionCandidate& pick = result.candidates[result.pick];
  out << layers.layers.size() << " layers onto P=" << options.request.ranks
      << ", M=" << options.request.microbatches << ": " << StrategyAtV(plan.request) << ", step "
      << Cell(best.timeline.metrics.makespan) << unit << " (" << result.evaluations
      << " plans simulated";
  if (pick.exhaustive == 1) {
    out << "; the only split for " << StrategyAtV(plan.request);
  } else if (pick.exhaustive > 1) {
    out << "; the best of all " << pick.exhaustive << " splits for " << StrategyAtV(plan.request);
  }
  out << ")\n\n";
  const bool bytes = layers.HasMemory();
  std::vector<std::string> header = {"stage", "layers", "F", "B", "I", "W"};
  if (bytes) {
    header.emplace_back("activation");
    header.emplace_back("static");
  }
  app::TextTable stages(header, {false, true});
  const std::vector<std::vector<std::string>> names = StageLayerNames(layers, result.best.split);
  for (size_t k = 0; k < names.size(); ++k) {
    const StageCosts& costs = plan.request.costs.stages[k];
    std::string held = names[k].front();
    if (names[k].size() > 1) held += " .. " + names[k].back();
    held += " (" + std::to_string(names[k].size()) + ")";
    std::vector<std::string> row = {std::to_string(k),          held,
                                    Cell(costs.forward),        Cell(costs.backward),
                                    Cell(costs.backward_input), Cell(costs.backward_weight)};
    if (bytes) {
      const StageMemory& memory = plan.request.memory.stages[k];
      row.push_back(app::FormatBytes(memory.activation));
      row.push_back(app::FormatBytes(memory.static_bytes));
    }
    stages.AddRow(row);
  }
  out << stages.Render() << "\n";
  const std::vector<double>& limits = options.request.memory_limits;
  std::vector<std::string> rank_header = {"rank", "peak memory"};
  if (!limits.empty()) rank_header.emplace_back("limit");
  rank_header.emplace_back("busy");
  app::TextTable ranks(rank_header);
  for (const RankTimeline& rank : best.timeline.ranks) {
    std::vector<std::string> row = {std::to_string(rank.rank.value),
                                    app::FormatMemory(rank.peak_memory, plan.request.memory)};
    if (!limits.empty()) {
      row.push_back(app::FormatBytes(limits[limits.size() == 1 ? 0 : rank.rank.value]));
    }
    row.push_back(Cell(rank.busy));
    ranks.AddRow(row);
  }
  out << ranks.Render() << "\n";
  const double step = best.timeline.metrics.makespan;
  const auto versus = [&](const SplitPlan& even) {
    const double other = even.planned.timeline.metrics.makespan;
    return StrategyAtV(even.planned.plan.request) + ": step " + Cell(other) + unit + " (" +
           app::FormatPercent(std::abs(other / step - 1)) +
           (other >= step ? " longer" : " shorter") + " than this split's)";
  };
  out << "the even split (torchtitan's default), with the same strategy: "
      << (result.even_same.has_value() ? versus(*result.even_same)
                                       : std::string("does not fit or plan"))
      << "\n";
  out << "the even split, with its best strategy: "
      << (result.even_best.has_value() ? versus(*result.even_best)
                                       : std::string("nothing fits or plans"))
      << "\n";
  return out.str();
}

Status ExecutePartition(const PartitionOptions& given) {
  PartitionOptions options = given;
  PIPEPLAN_ASSIGN_OR_RETURN(
      options.request.layers,
      app::LoadProtoFile(options.layers_path, FileKind::kLayerCosts, ParseLayerCosts));
  StatusOr<PartitionResult> result = Partition(options.request);
  if (!result.ok()) return result.status();
  for (const std::string& note : result->notes) app::PrintNote(note);
  std::vector<app::OutputFile> files;
  if (options.output.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(
        std::string data,
        SerializePlan(result->best.planned.plan, DetectProtoFormat(*options.output, "")));
    files.push_back({*options.output, std::move(data)});
  }
  if (options.split_output.has_value()) {
    files.push_back(
        {*options.split_output, SplitForRuntimesJson(options.request.layers, result->best.split)});
  }
  PIPEPLAN_RETURN_IF_ERROR(app::WriteFilesAtomic(files));
  std::cout << (options.json ? RenderJson(options, *result) : RenderTables(options, *result));
  return Status::Ok();
}

}  // namespace

int RunPartitionCommand(const std::vector<std::string>& args) {
  static const app::CommandSpec<PartitionOptions> kSpec = {"partition",
                                                           kHelp,
                                                           {{"layers"},
                                                            {"ranks"},
                                                            {"microbatches"},
                                                            {"strategy"},
                                                            {"stages-per-rank"},
                                                            {"memory-limit"},
                                                            {"comm"},
                                                            {"runtime"},
                                                            {"output", app::FlagKind::kValue, 'o'},
                                                            {"split"},
                                                            {"json", app::FlagKind::kBool}},
                                                           ParsePartitionOptions,
                                                           ExecutePartition};
  return app::RunCommand(kSpec, args);
}

}  // namespace pipeplan::cli
