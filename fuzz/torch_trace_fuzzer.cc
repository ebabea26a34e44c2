// Fuzz target: 'pipeplan import --format torch-trace', torch.profiler Chrome traces of a torch
// pipelining job, one per rank. The input is gzip data (inflated as a .json.gz file is) or
// JSON text; a 0x00 byte splits it into two traces (two ranks' files). Each is parsed and the
// traces put in rank order, then imported as 'import' does: against small plans of as many
// ranks (1f1b at M = 2 and 4, interleaved 1F1B at V = 2), and without a plan, as the job's
// executed order. An import that succeeds must give steps whose timelines are finite with no
// action ending before it starts, finite clock shifts >= 0, a chosen step among them, and the
// same step again when asked for it by number. The same text is also read for its layer
// ranges, as 'import --format torch-layer-trace' does.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.h"
#include "pipeplan/app/files.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/formats/torch_trace.h"
#include "pipeplan/measurement/import_trace.h"
#include "pipeplan/measurement/layer_trace.h"

namespace {

using namespace pipeplan;

// What one trace may inflate to: a few steps of a small job, far below import's default limit.
constexpr uint64_t kMaxInflatedBytes = 8u << 20;
// Matching a trace to a plan takes time in its steps times its actions; past these an input
// stops after parsing, so that every input takes milliseconds.
constexpr size_t kMaxTraceActions = 4 * fuzz::kMaxComputeCells;
constexpr size_t kMaxTraceSteps = 16;

bool IsGzip(std::string_view data) { return data.starts_with("\x1f\x8b"); }

// The traces' text: gzip data inflated, anything else as it is; nullopt when inflating fails.
std::optional<std::string> TraceText(std::string_view data) {
  if (!IsGzip(data)) return std::string(data);
  StatusOr<std::string> inflated = app::Gunzip(data, "fuzz", kMaxInflatedBytes);
  if (!inflated.ok()) return std::nullopt;
  return *std::move(inflated);
}

// One trace per rank: the text up to the first 0x00 byte, and what follows it, if anything.
std::vector<std::string_view> SplitRanks(std::string_view text) {
  const size_t split = text.find('\0');
  if (split == std::string_view::npos) return {text};
  return {text.substr(0, split), text.substr(split + 1)};
}

bool SmallEnoughToImport(const TorchTrace& trace) {
  return trace.actions.size() <= kMaxTraceActions && trace.steps.size() <= kMaxTraceSteps;
}

// The traces parsed and in rank order, as 'import' reads its files; nullopt when one does not
// parse, is too large to import quickly, or the ranks do not fit together.
std::optional<std::vector<TraceFile>> ReadRanks(const std::vector<std::string_view>& texts) {
  std::vector<TraceFile> files;
  for (const std::string_view text : texts) {
    StatusOr<TorchTrace> trace = ParseTorchTrace(text);
    if (!trace.ok() || !SmallEnoughToImport(*trace)) return std::nullopt;
    files.push_back({"trace" + std::to_string(files.size()) + ".json", *std::move(trace)});
  }
  StatusOr<std::vector<TraceFile>> ordered = OrderByRank(std::move(files));
  if (!ordered.ok()) return std::nullopt;
  PIPEPLAN_FUZZ_CHECK(ordered->size() == texts.size());
  return *std::move(ordered);
}

void CheckImported(const TraceImport& imported, size_t ranks) {
  PIPEPLAN_FUZZ_CHECK(!imported.steps.empty());
  PIPEPLAN_FUZZ_CHECK(imported.chosen < imported.steps.size());
  for (const ImportedStep& step : imported.steps) {
    fuzz::CheckTimeline(step.timeline);
    PIPEPLAN_FUZZ_CHECK(step.timeline.ranks.size() == ranks);
    PIPEPLAN_FUZZ_CHECK(step.clock_shifts.size() == ranks);
    for (const double shift : step.clock_shifts) {
      PIPEPLAN_FUZZ_CHECK(std::isfinite(shift) && shift >= 0);
    }
  }
}

// 'import --plan': every step, then (--step N) the first one by its number.
void ImportWith(const Plan& plan, const std::vector<TraceFile>& ranks) {
  const StatusOr<TraceImport> imported = ImportTorchTraces(plan, ranks, std::nullopt);
  if (!imported.ok()) return;
  CheckImported(*imported, ranks.size());
  const int first = imported->steps.front().number;
  const StatusOr<TraceImport> asked = ImportTorchTraces(plan, ranks, first);
  PIPEPLAN_FUZZ_CHECK_OK(asked.status());
  CheckImported(*asked, ranks.size());
  PIPEPLAN_FUZZ_CHECK(asked->steps[asked->chosen].number == first);
}

// Small plans of `ranks` ranks a job may have run, built once.
const std::vector<Plan>& PlansOf(size_t ranks) {
  const auto build = [](int p) {
    std::vector<PlanRequest> requests = {fuzz::MakeRequest("1f1b", p, 2),
                                         fuzz::MakeRequest("1f1b", p, 4)};
    if (p == 2) requests.push_back(fuzz::MakeRequest("interleaved-1f1b", p, 4, 2));
    std::vector<Plan> plans;
    for (const PlanRequest& request : requests) {
      StatusOr<Plan> plan = BuildPlan(request);
      PIPEPLAN_FUZZ_CHECK_OK(plan.status());
      plans.push_back(*std::move(plan));
    }
    return plans;
  };
  static const std::vector<Plan> kOneRank = build(1);
  static const std::vector<Plan> kTwoRanks = build(2);
  return ranks == 1 ? kOneRank : kTwoRanks;
}

// 'import' without --plan (cli/trace_import.cc): the executed compute order read as torch's
// CSV for its topology, the executed programs with their transfers as the plan.
std::optional<Plan> PlanOfExecutedOrder(const std::vector<TraceFile>& ranks) {
  std::string csv;
  for (const std::vector<Action>& row : ExecutedComputeOrder(ranks)) {
    for (size_t i = 0; i < row.size(); ++i) csv += (i == 0 ? "" : ",") + ToString(row[i]);
    csv += "\n";
  }
  const StatusOr<TorchCsvImport> imported =
      ImportTorchCsv(csv, TorchCsvFormat::kComputeOnly, std::nullopt);
  if (!imported.ok() || !fuzz::SmallEnoughToPlan(imported->topology)) return std::nullopt;
  PlanRequest request;
  request.topology = imported->topology;
  request.strategy = "imported";
  StatusOr<std::vector<RankProgram>> programs = ExecutedPrograms(ranks, request.topology);
  if (!programs.ok()) return std::nullopt;
  PIPEPLAN_FUZZ_CHECK(programs->size() == ranks.size());
  StatusOr<Plan> plan = BuildPlanFromPrograms(request, *std::move(programs));
  if (!plan.ok()) return std::nullopt;
  return *std::move(plan);
}

// 'import --format torch-layer-trace': the same text read for its layer ranges. A file made
// must be a valid layer cost file with a count of ranges per layer.
void ImportLayers(const std::vector<std::string_view>& texts) {
  std::vector<TraceFile> files;
  for (const std::string_view text : texts) {
    StatusOr<TorchTrace> trace = ParseTorchTrace(text, TraceContent::kLayers);
    if (!trace.ok()) return;
    PIPEPLAN_FUZZ_CHECK(!trace->layer_ranges.empty());
    files.push_back({"trace" + std::to_string(files.size()) + ".json", *std::move(trace)});
  }
  StatusOr<std::vector<TraceFile>> ordered = OrderByRank(std::move(files));
  if (!ordered.ok()) return;
  const StatusOr<LayerTraceImport> imported = LayerCostsOfTraces(*ordered);
  if (!imported.ok()) return;
  PIPEPLAN_FUZZ_CHECK_OK(ValidateLayerCosts(imported->costs));
  PIPEPLAN_FUZZ_CHECK(imported->counts.size() == imported->costs.layers.size());
  for (const LayerSampleCounts& counts : imported->counts) {
    PIPEPLAN_FUZZ_CHECK(counts.forwards >= 1 && counts.backwards >= 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::optional<std::string> text = TraceText(fuzz::AsText(data, size));
  if (!text.has_value()) return 0;
  ImportLayers(SplitRanks(*text));
  const std::optional<std::vector<TraceFile>> ranks = ReadRanks(SplitRanks(*text));
  if (!ranks.has_value()) return 0;
  for (const Plan& plan : PlansOf(ranks->size())) ImportWith(plan, *ranks);
  if (const std::optional<Plan> executed = PlanOfExecutedOrder(*ranks)) {
    ImportWith(*executed, *ranks);
  }
  return 0;
}
