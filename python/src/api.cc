#include "api.h"

#include <array>
#include <limits>
#include <span>
#include <string_view>
#include <utility>

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/app/cp_sat_solver.h"
#include "pipeplan/app/files.h"
#include "pipeplan/app/proto_file.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/cli/comparison.h"
#include "pipeplan/cli/torch_steps.h"
#include "pipeplan/cli/trace_import.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/formats/split_layout.h"
#include "pipeplan/formats/torch_csv.h"
#include "pipeplan/measurement/calibrate.h"
#include "pipeplan/measurement/timeline_set.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/planner/make_plan.h"
#include "pipeplan/planner/normalize.h"
#include "pipeplan/planner/optimal.h"
#include "pipeplan/planner/partition.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan::python {
namespace {

// The flags the shared request checks name, each a keyword argument of the same name.
constexpr std::array<std::string_view, 18> kKeywordFlags = {"stages-per-rank",
                                                            "microbatch-group-size",
                                                            "memory-limit",
                                                            "post-validation",
                                                            "receive-overhead",
                                                            "backward-input",
                                                            "backward-weight",
                                                            "time-limit",
                                                            "microbatches",
                                                            "strategy",
                                                            "ranks",
                                                            "runtime",
                                                            "costs",
                                                            "forward",
                                                            "backward",
                                                            "overlap",
                                                            "comm",
                                                            "export"};

// Each call of the API is a command of its own: the files it read are its inputs, not the
// next call's (app::WasReadByThisProcess), so a plan loaded from a file may be saved over it.
class CallScope {
 public:
  CallScope() = default;
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  ~CallScope() { app::ForgetInputFiles(); }
};

// A request's values checked as the flags are, then in the Python API's terms.
StatusOr<app::RequestFlags> CheckCall(const PlanCall& call, app::StrategyFlag strategy_flag) {
  app::RequestValues values = call.values;
  if (call.memory_limit_text.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(const app::MemoryAmount amount,
                              app::ParseMemoryLimit(*call.memory_limit_text, "memory_limit"));
    values.memory_limit = amount.value;
    values.memory_limit_in_bytes = amount.bytes;
  }
  return app::CheckRequestValues(values, strategy_flag);
}

// The request planned through the one way in, the solver given `time_limit_s` (which applies
// to the solver-made strategies only).
StatusOr<Evaluated> PlanWithin(const PlanRequest& request, std::optional<double> time_limit_s) {
  PlanOptions options{.solve = app::RunCpSat};
  if (time_limit_s.has_value()) {
    PIPEPLAN_RETURN_IF_ERROR(app::CheckTimeLimit(*time_limit_s, "time_limit"));
    if (FindOptimalStrategy(request.strategy) == nullptr) {
      return InvalidArgument("time_limit applies to optimal, optimal-v and optimal-fb only, not " +
                             request.strategy);
    }
    options.solver.time_limit_s = *time_limit_s;
  }
  return MakePlan(request, options);
}

PlanHandle HandleOf(Evaluated made) {
  return PlanHandle{.plan = std::move(made.plan),
                    .timeline = std::move(made.timeline),
                    .notes = std::move(made.notes)};
}

Status KeywordStatus(const Status& status) {
  if (status.ok()) return status;
  return Status(status.code(), InKeywordTerms(status.message()));
}

StatusOr<int> CheckRank(const Plan& plan, int rank) {
  const int ranks = plan.request.topology.ranks;
  if (rank < 0 || rank >= ranks) {
    return InvalidArgument("rank: " + std::to_string(rank) + " is not a rank of the plan (0.." +
                           std::to_string(ranks - 1) + ")");
  }
  return rank;
}

TorchCsvFormat CsvFormat(bool comms) {
  return comms ? TorchCsvFormat::kComputeComms : TorchCsvFormat::kComputeOnly;
}

// The first of the readers that takes `content`, for a file that records no kind.
StatusOr<Loaded> ParseUnrecorded(const std::string& path, const app::ProtoFile& file) {
  if (StatusOr<CostModel> costs = ParseCostModel(file.content, file.format); costs.ok()) {
    return Loaded(*std::move(costs));
  }
  if (StatusOr<Plan> plan = ParsePlan(file.content, file.format); plan.ok()) {
    return Loaded(PlanHandle{.plan = *std::move(plan), .timeline = {}, .notes = {}});
  }
  if (StatusOr<TimelineFile> timeline = ParseTimelineFile(file.content, file.format);
      timeline.ok()) {
    return Loaded(TimelineHandle{.timeline = std::move(timeline->timeline),
                                 .plan = std::move(timeline->plan),
                                 .notes = {},
                                 .seconds_per_unit = timeline->seconds_per_unit});
  }
  if (StatusOr<Profile> profile = ParseProfile(file.content, file.format); profile.ok()) {
    return Loaded(*std::move(profile));
  }
  if (StatusOr<PlanRequest> request = ParseRequest(file.content, file.format); request.ok()) {
    return Loaded(*std::move(request));
  }
  return InvalidArgument(path +
                         ": not a pipeplan file (it records no kind and reads as none of cost "
                         "model, plan, timeline, profile and request)");
}

template <typename T>
Status SaveAs(const std::string& path, const T& value,
              StatusOr<std::string> (*serialize)(const T&, ProtoFormat)) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string data, serialize(value, DetectProtoFormat(path, "")));
  return app::WriteFileAtomic(path, data);
}

}  // namespace

std::string InKeywordTerms(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  std::string_view rest = message;
  while (!rest.empty()) {
    const size_t dashes = rest.find("--");
    out += rest.substr(0, dashes);
    if (dashes == std::string_view::npos) break;
    rest.remove_prefix(dashes + 2);
    std::string_view word = rest.substr(0, rest.find_first_not_of("abcdefghijklmnopqrstuvwxyz-"));
    bool keyword = false;
    for (const std::string_view flag : kKeywordFlags) keyword = keyword || word == flag;
    if (!keyword) {
      out += "--";
      continue;
    }
    for (const char c : word) out += c == '-' ? '_' : c;
    rest.remove_prefix(word.size());
  }
  return out;
}

StatusOr<PlanHandle> MakePlanFor(const PlanCall& call) {
  const CallScope call_scope;
  StatusOr<app::RequestFlags> flags = CheckCall(call, app::StrategyFlag::kRequired);
  if (!flags.ok()) return KeywordStatus(flags.status());
  StatusOr<PlanRequest> request = app::LoadRequest(*flags);
  if (!request.ok()) return KeywordStatus(app::InFlagTerms(request.status(), *flags));
  StatusOr<Evaluated> made = PlanWithin(*request, call.time_limit_s);
  if (!made.ok()) return KeywordStatus(app::InFlagTerms(made.status(), *flags));
  return HandleOf(*std::move(made));
}

StatusOr<PlanHandle> MakePlanFromRequest(const PlanRequest& request,
                                         std::optional<double> time_limit_s) {
  PIPEPLAN_ASSIGN_OR_RETURN(Evaluated made, PlanWithin(request, time_limit_s));
  return HandleOf(std::move(made));
}

StatusOr<TimelineHandle> SimulatePlan(const PlanHandle& plan, const std::optional<CostModel>& costs,
                                      const std::optional<std::string>& runtime,
                                      const std::optional<std::string>& export_format) {
  StatusOr<std::optional<TorchLists>> lists = cli::ParseTorchRun(runtime, export_format);
  if (!lists.ok()) return KeywordStatus(lists.status());
  TimelineHandle out{.timeline = {}, .plan = plan.plan, .notes = {}, .seconds_per_unit = {}};
  if (costs.has_value()) {
    StatusOr<std::vector<std::string>> notes = RecostPlan(*out.plan, *costs);
    if (!notes.ok()) return notes.status().WithContext("costs");
    out.notes = *std::move(notes);
  }
  if (lists->has_value()) {
    StatusOr<TorchRuntimeRun> run = cli::SimulateTorchExport(*out.plan, **lists);
    if (!run.ok()) return KeywordStatus(run.status());
    out.plan = std::move(run->plan);
    out.timeline = std::move(run->timeline);
    return out;
  }
  if (!costs.has_value() && plan.timeline.has_value()) {
    out.timeline = *plan.timeline;
    return out;
  }
  PIPEPLAN_ASSIGN_OR_RETURN(out.timeline, Simulate(*out.plan));
  return out;
}

StatusOr<std::vector<CompareRow>> Compare(const PlanCall& call) {
  const CallScope call_scope;
  StatusOr<app::RequestFlags> flags = CheckCall(call, app::StrategyFlag::kNone);
  if (!flags.ok()) return KeywordStatus(flags.status());
  StatusOr<cli::ComparisonRequest> request = cli::LoadComparisonRequest(*flags);
  if (!request.ok()) return KeywordStatus(app::InFlagTerms(request.status(), *flags));
  std::vector<CompareRow> rows;
  for (cli::ComparisonRow& row : cli::RunComparison(request->base, request->multi_stage_v)) {
    CompareRow& out = rows.emplace_back();
    out.strategy = row.strategy;
    out.stages_per_rank = row.stages_per_rank;
    out.best = row.best;
    if (!row.assumes.empty()) out.assumes = row.assumes;
    if (!row.made.has_value()) {
      out.error = InKeywordTerms(app::InFlagTerms(row.error, *flags));
      continue;
    }
    out.makespan = row.made->timeline.metrics.makespan;
    out.peak_memory = PeakMemory(row.made->timeline);
    out.bubble = row.made->timeline.metrics.bubble_fraction_max;
    if (row.torch.has_value()) {
      const auto makespan = [](const cli::TorchStep& step) -> std::optional<double> {
        if (!step.run.has_value()) return std::nullopt;
        return step.run->timeline.metrics.makespan;
      };
      out.torch_csv_comms = makespan(row.torch->plan_transfers);
      out.torch_csv = makespan(row.torch->torch_lowering);
    }
  }
  return rows;
}

namespace {

StatusOr<LayerCosts> LayersOf(const PartitionCall& call) {
  if (call.layers_path.has_value()) {
    StatusOr<LayerCosts> layers =
        app::LoadProtoFile(*call.layers_path, FileKind::kLayerCosts, ParseLayerCosts);
    if (!layers.ok()) return layers.status().WithContext("layers");
    return layers;
  }
  StatusOr<LayerCosts> layers = ParseLayerCosts(call.layers_json.value_or(""), ProtoFormat::kJson);
  if (!layers.ok()) return layers.status().WithContext("layers");
  return layers;
}

StatusOr<int> CountArg(const char* name, std::optional<int64_t> value) {
  if (!value.has_value()) return InvalidArgument(std::string(name) + " is required");
  if (*value < 1 || *value > std::numeric_limits<int>::max()) {
    return InvalidArgument(std::string(name) + " must be >= 1, got " + std::to_string(*value));
  }
  return static_cast<int>(*value);
}

StatusOr<PartitionRequest> PartitionRequestOf(const PartitionCall& call) {
  PartitionRequest request;
  PIPEPLAN_ASSIGN_OR_RETURN(request.layers, LayersOf(call));
  PIPEPLAN_ASSIGN_OR_RETURN(request.ranks, CountArg("ranks", call.ranks));
  PIPEPLAN_ASSIGN_OR_RETURN(request.microbatches, CountArg("microbatches", call.microbatches));
  request.strategy = call.strategy;
  if (call.stages_per_rank.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(request.stages_per_rank,
                              CountArg("stages_per_rank", call.stages_per_rank));
  }
  if (call.memory_limit.has_value()) {
    if (!(*call.memory_limit > 0)) {
      return InvalidArgument("memory_limit must be > 0 bytes, got " +
                             FormatCompact(*call.memory_limit));
    }
    request.memory_limits = {*call.memory_limit};
  }
  if (call.memory_limit_text.has_value()) {
    PIPEPLAN_ASSIGN_OR_RETURN(request.memory_limits,
                              app::ParseMemoryLimits(*call.memory_limit_text, "memory_limit"));
  }
  request.link.latency = call.comm;
  if (call.runtime.has_value()) {
    const std::optional<Runtime> runtime = RuntimeFromName(*call.runtime);
    if (!runtime.has_value()) {
      return InvalidArgument("runtime: unknown runtime '" + *call.runtime + "' (one of " +
                             std::string(RuntimeNames()) + ")");
    }
    request.runtime = *runtime;
  }
  return request;
}

}  // namespace

StatusOr<SplitHandle> PartitionFor(const PartitionCall& call) {
  const CallScope call_scope;
  PIPEPLAN_ASSIGN_OR_RETURN(const PartitionRequest request, PartitionRequestOf(call));
  PIPEPLAN_ASSIGN_OR_RETURN(PartitionResult result, Partition(request));
  SplitHandle out;
  out.stages = StageLayerNames(request.layers, result.best.split);
  out.megatron_layout = MegatronLayout(request.layers, result.best.split);
  if (result.even_best.has_value()) {
    const Plan& even = result.even_best->planned.plan;
    out.even_strategy = even.request.strategy;
    out.even_stages_per_rank = even.request.topology.stages_per_rank;
    out.even_makespan = result.even_best->planned.timeline.metrics.makespan;
  }
  if (result.even_same.has_value()) {
    out.even_same_strategy_makespan = result.even_same->planned.timeline.metrics.makespan;
  }
  out.plans_simulated = result.evaluations;
  out.exhaustive = result.candidates[result.pick].exhaustive;
  out.time_unit = request.layers.time_unit;
  out.plan = PlanHandle{.plan = std::move(result.best.planned.plan),
                        .timeline = std::move(result.best.planned.timeline),
                        .notes = std::move(result.notes)};
  return out;
}

StatusOr<std::vector<std::vector<std::string>>> ActionTable(const Plan& plan, bool comms) {
  std::vector<std::vector<std::string>> rows = TorchActionRows(plan, CsvFormat(comms));
  rows.resize(static_cast<size_t>(plan.request.topology.ranks));
  return rows;
}

StatusOr<std::vector<std::string>> ActionTokens(const Plan& plan, int rank, bool comms) {
  PIPEPLAN_RETURN_IF_ERROR(CheckRank(plan, rank).status());
  PIPEPLAN_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> rows, ActionTable(plan, comms));
  return std::move(rows[static_cast<size_t>(rank)]);
}

StatusOr<std::vector<int>> StageIndices(const Plan& plan, int rank) {
  PIPEPLAN_RETURN_IF_ERROR(CheckRank(plan, rank).status());
  const StageMap stages(plan.request.topology);
  std::vector<int> out;
  for (const StageId stage : stages.StagesOf(RankId{rank})) out.push_back(stage.value);
  return out;
}

StatusOr<std::string> TorchCsv(const Plan& plan, bool comms) {
  PIPEPLAN_ASSIGN_OR_RETURN(TorchCsvExport exported, ExportTorchCsv(plan, CsvFormat(comms)));
  return std::move(exported.csv);
}

StatusOr<Loaded> LoadFile(const std::string& path) {
  const CallScope call_scope;
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string content, app::ReadFile(path));
  if (content.empty()) return InvalidArgument(path + ": the file is empty");
  if (LooksLikeTorchCsv(content)) {
    return InvalidArgument(path +
                           ": a torch pipelining CSV, not a pipeplan file; turn it into a plan "
                           "with 'pipeplan import'");
  }
  const app::ProtoFile file{.content = content, .format = DetectProtoFormat(path, content)};
  StatusOr<FileHeader> header = ReadFileHeader(file.content, file.format);
  if (!header.ok()) return header.status().WithContext(path);
  if (!header->kind.has_value()) return ParseUnrecorded(path, file);
  const FileKind kind = *header->kind;
  const auto explained = [&](const Status& status) {
    return app::ExplainParseError(path, file, kind, status);
  };
  switch (kind) {
    case FileKind::kPlan: {
      StatusOr<Plan> plan = ParsePlan(file.content, file.format);
      if (!plan.ok()) return explained(plan.status());
      if (Status valid = ValidatePlan(*plan); !valid.ok()) return valid.WithContext(path);
      return Loaded(PlanHandle{.plan = *std::move(plan), .timeline = {}, .notes = {}});
    }
    case FileKind::kTimeline: {
      StatusOr<TimelineFile> timeline = ParseTimelineFile(file.content, file.format);
      if (!timeline.ok()) return explained(timeline.status());
      return Loaded(TimelineHandle{.timeline = std::move(timeline->timeline),
                                   .plan = std::move(timeline->plan),
                                   .notes = {},
                                   .seconds_per_unit = timeline->seconds_per_unit});
    }
    case FileKind::kCostModel: {
      StatusOr<CostModel> costs = ParseCostModel(file.content, file.format);
      if (!costs.ok()) return explained(costs.status());
      return Loaded(*std::move(costs));
    }
    case FileKind::kLayerCosts:
      return InvalidArgument(
          path +
          ": a layer costs file; pipeplan.partition(path, ranks=..., microbatches=...) "
          "reads it");
    case FileKind::kProfile: {
      StatusOr<Profile> profile = ParseProfile(file.content, file.format);
      if (!profile.ok()) return explained(profile.status());
      return Loaded(*std::move(profile));
    }
    case FileKind::kRequest: {
      StatusOr<PlanRequest> request = ParseRequest(file.content, file.format);
      if (!request.ok()) return explained(request.status());
      return Loaded(*std::move(request));
    }
  }
  return InvalidArgument(path + ": unknown file kind");
}

Status SavePlan(const Plan& plan, const std::string& path) {
  return SaveAs(path, plan, SerializePlan);
}

Status SaveTimeline(const TimelineHandle& timeline, const std::string& path) {
  const TimelineFile file{.timeline = timeline.timeline,
                          .plan = timeline.plan,
                          .seconds_per_unit = timeline.seconds_per_unit};
  return SaveAs(path, file, SerializeTimelineFile);
}

Status SaveCostModel(const CostModel& costs, const std::string& path) {
  return SaveAs(path, costs, SerializeCostModel);
}

Status SaveProfile(const Profile& profile, const std::string& path) {
  return SaveAs(path, profile, SerializeProfile);
}

Status SaveRequest(const PlanRequest& request, const std::string& path) {
  return SaveAs(path, request, SerializeRequest);
}

namespace {

NamedTimeline NamedOf(std::string name, const TimelineHandle& timeline) {
  return {.name = std::move(name),
          .timeline = &timeline.timeline,
          .plan = &timeline.plan,
          .seconds_per_unit = timeline.seconds_per_unit};
}

constexpr std::string_view kHowToCarryPlan =
    "simulate(plan) and import_torch_traces(paths, plan) give timelines that do";

}  // namespace

StatusOr<Profile> ProfileOf(const std::vector<TimelineHandle>& timelines,
                            std::optional<double> time_scale) {
  if (timelines.empty()) return InvalidArgument("timelines: none given");
  if (time_scale.has_value() && !(*time_scale > 0)) {
    return InvalidArgument("time_scale must be > 0 (seconds per unit), got " +
                           FormatCompact(*time_scale));
  }
  std::vector<NamedTimeline> named;
  for (size_t i = 0; i < timelines.size(); ++i) {
    named.push_back(NamedOf("timelines[" + std::to_string(i) + "]", timelines[i]));
  }
  return ProfileTimelines(named, {.how_to_carry_plan = kHowToCarryPlan,
                                  .time_scale = time_scale,
                                  .time_scale_name = "time_scale",
                                  .source = std::nullopt});
}

StatusOr<CostModel> CalibrateProfile(const Profile& profile, const std::string& unit) {
  const std::optional<TimeUnit> parsed = TimeUnitFromName(unit);
  if (!parsed.has_value()) {
    return InvalidArgument("unit: unknown unit '" + unit + "' (s, ms, us or ns)");
  }
  return Calibrate(profile, CalibrateOptions{.unit = *parsed});
}

StatusOr<TimelineHandle> ImportTorchTraces(const std::vector<std::string>& paths,
                                           const std::optional<PlanHandle>& plan,
                                           std::optional<int> step) {
  const CallScope call_scope;
  if (paths.empty()) return InvalidArgument("paths: no trace given (one per rank)");
  cli::TraceImportOptions options;
  options.traces = paths;
  options.step = step;
  std::optional<Plan> given;
  if (plan.has_value()) given = plan->plan;
  PIPEPLAN_ASSIGN_OR_RETURN(cli::ImportedTraces traces,
                            cli::ImportTraces(options, std::move(given)));
  std::vector<ImportedStep>& steps = traces.imported.steps;
  return TimelineHandle{.timeline = std::move(steps[traces.imported.chosen].timeline),
                        .plan = std::move(traces.plan),
                        .notes = std::move(traces.notes),
                        .seconds_per_unit = cli::kTraceSecondsPerUnit};
}

StatusOr<std::pair<std::string, std::vector<std::string>>> ImportLayerTraces(
    const std::vector<std::string>& paths) {
  const CallScope call_scope;
  if (paths.empty()) return InvalidArgument("paths: no trace given (one per rank)");
  cli::TraceImportOptions options;
  options.traces = paths;
  PIPEPLAN_ASSIGN_OR_RETURN(LayerTraceImport imported, cli::ImportLayerTraces(options));
  PIPEPLAN_ASSIGN_OR_RETURN(std::string json,
                            SerializeLayerCosts(imported.costs, ProtoFormat::kJson));
  return std::pair(std::move(json), std::move(imported.notes));
}

StatusOr<TimelineDiff> DiffOf(const TimelineHandle& expected, const TimelineHandle& measured) {
  PIPEPLAN_ASSIGN_OR_RETURN(
      const Plan plan,
      PlanOfBoth(NamedOf("expected", expected), NamedOf("measured", measured), kHowToCarryPlan));
  return DiffTimelines(plan, expected.timeline, measured.timeline);
}

}  // namespace pipeplan::python
