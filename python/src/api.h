// What the Python package's functions compute, torch-free and Python-free: module.cc binds
// these to `pipeplan._core`, python/pipeplan/__init__.py gives them their typed signatures.
// Planning goes through the one way in (MakePlan) with the request checked as the command
// line's flags are (app::CheckRequestValues), so `pipeplan.plan(...)` and `pipeplan plan ...`
// make the same plan, byte for byte. Errors name the keyword arguments ("stages_per_rank must
// be >= 1, got 0"), not the flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pipeplan/app/request_flags.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/profile.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/simulation/timeline_diff.h"

namespace pipeplan::python {

// A plan as Python holds it: the plan, its simulation under its own costs where the planner
// made one (a plan read from a file has none until simulated), and how it was chosen.
struct PlanHandle {
  Plan plan;
  std::optional<Timeline> timeline;
  std::vector<std::string> notes;
};

// A timeline, the plan it is of (where known) and what the figures it was simulated with
// estimated.
struct TimelineHandle {
  Timeline timeline;
  std::optional<Plan> plan;
  std::vector<std::string> notes;
  std::optional<double> seconds_per_unit;  // a measured timeline's clock: seconds per unit
};

// pipeplan.plan's arguments beyond the request's values.
struct PlanCall {
  app::RequestValues values;
  std::optional<std::string> memory_limit_text;  // "70GiB": parsed as --memory-limit is
  std::optional<double> time_limit_s;            // the solver's budget (optimal*)
};

StatusOr<PlanHandle> MakePlanFor(const PlanCall& call);

// The plan's simulation: the one made with it under its own costs, or under `costs` (fitted to
// its stages as `pipeplan simulate PLAN --costs FILE` fits them); on torch's runtime where
// `runtime` names it, loaded from `export_format` (`simulate --runtime --export`): the handle's
// plan is then the lists torch runs.
StatusOr<TimelineHandle> SimulatePlan(const PlanHandle& plan, const std::optional<CostModel>& costs,
                                      const std::optional<std::string>& runtime,
                                      const std::optional<std::string>& export_format);

// One row of pipeplan.compare: `error` set where the strategy could not plan.
struct CompareRow {
  std::string strategy;
  int stages_per_rank = 1;
  std::optional<double> makespan;
  std::optional<double> peak_memory;
  std::optional<double> bubble;  // the largest bubble fraction over ranks
  bool best = false;
  std::optional<std::string> error;
  std::optional<std::string> assumes;  // what the row's figures rest on that no run measured
  // Under runtime torch: the step on torch's runtime from each export (unset where it cannot run).
  std::optional<double> torch_csv_comms;
  std::optional<double> torch_csv;
};
// `pipeplan compare`: every strategy on the request (uniform figures are one rank's share).
StatusOr<std::vector<CompareRow>> Compare(const PlanCall& call);

// Torch's action tokens of `rank` ("0F0", "1SEND_F0", ...), as the torch CSV exports them
// (a dual-placement plan as pipeplan.torch.schedule runs it: TorchActionRows).
StatusOr<std::vector<std::string>> ActionTokens(const Plan& plan, int rank, bool comms);
// Every rank's tokens, in rank order.
StatusOr<std::vector<std::vector<std::string>>> ActionTable(const Plan& plan, bool comms);
// The stages `rank` holds, in its local order (chunk 0 first).
StatusOr<std::vector<int>> StageIndices(const Plan& plan, int rank);
StatusOr<std::string> TorchCsv(const Plan& plan, bool comms);

// pipeplan.partition's arguments: the layers as a file's path or as the JSON text of one.
struct PartitionCall {
  std::optional<std::string> layers_path;
  std::optional<std::string> layers_json;
  std::optional<int64_t> ranks;
  std::optional<int64_t> microbatches;
  std::string strategy = "auto";
  std::optional<int64_t> stages_per_rank;
  std::optional<double> memory_limit;            // bytes
  std::optional<std::string> memory_limit_text;  // "70GiB"
  double comm = 0.0;
  std::optional<std::string> runtime;
};

// `pipeplan partition`'s result: the split, its plan and the even split beside it.
struct SplitHandle {
  PlanHandle plan;
  std::vector<std::vector<std::string>> stages;  // the layer names per stage, in stage order
  std::optional<std::string> megatron_layout;    // nullopt where Megatron cannot hold it
  std::optional<std::string> even_strategy;      // the even split's best strategy and its step
  std::optional<int> even_stages_per_rank;
  std::optional<double> even_makespan;
  std::optional<double> even_same_strategy_makespan;
  int plans_simulated = 0;
  int exhaustive = 0;  // splits weighed where every one was, else 0
  std::string time_unit;
};
StatusOr<SplitHandle> PartitionFor(const PartitionCall& call);

// A request file's plan (`pipeplan plan --request FILE`): errors name the file's fields.
StatusOr<PlanHandle> MakePlanFromRequest(const PlanRequest& request,
                                         std::optional<double> time_limit_s);

// Any pipeplan file, by what it records it holds; a file that records no kind (written by
// hand) is read as the first of cost model, plan, timeline, profile and request it parses as.
using Loaded = std::variant<PlanHandle, TimelineHandle, CostModel, Profile, PlanRequest>;
StatusOr<Loaded> LoadFile(const std::string& path);

// Written atomically in the format the name says (.json, .textproto/.txtpb/.pbtxt, else
// binary), as the command line writes them.
Status SavePlan(const Plan& plan, const std::string& path);
Status SaveTimeline(const TimelineHandle& timeline, const std::string& path);
Status SaveCostModel(const CostModel& costs, const std::string& path);
Status SaveProfile(const Profile& profile, const std::string& path);
Status SaveRequest(const PlanRequest& request, const std::string& path);

// The profile of timelines of one plan and time scale (`pipeplan profile`); `time_scale` (s per
// unit) for those that record none.
StatusOr<Profile> ProfileOf(const std::vector<TimelineHandle>& timelines,
                            std::optional<double> time_scale);
// A profile to a cost model in `unit` ("s", "ms", "us", "ns": `pipeplan calibrate --unit`).
StatusOr<CostModel> CalibrateProfile(const Profile& profile, const std::string& unit);

// torch.profiler traces of a torch pipelining job, one per rank, matched to `plan` (else to the
// order the job ran): the measured timeline of `step` (else the median step), in microseconds,
// with its plan and the import's notes (`pipeplan import --format torch-trace`).
StatusOr<TimelineHandle> ImportTorchTraces(const std::vector<std::string>& paths,
                                           const std::optional<PlanHandle>& plan,
                                           std::optional<int> step);

// The layer ranges of torch.profiler traces (one per rank) as a layer cost file's JSON, and
// the import's notes (`pipeplan import --format torch-layer-trace`).
StatusOr<std::pair<std::string, std::vector<std::string>>> ImportLayerTraces(
    const std::vector<std::string>& paths);

// Two timelines of one plan side by side (`pipeplan diff`): `measured` against `expected`.
StatusOr<TimelineDiff> DiffOf(const TimelineHandle& expected, const TimelineHandle& measured);

// A message in the Python API's terms: the flags the shared checks name become the keyword
// arguments ("--stages-per-rank" -> "stages_per_rank").
std::string InKeywordTerms(std::string_view message);

}  // namespace pipeplan::python
