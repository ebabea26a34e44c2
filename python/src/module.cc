// pipeplan._core: the Python package's C++ core (nanobind). Bindings only: what each function
// computes is in api.h; python/pipeplan/__init__.py checks the arguments' types and gives the
// public functions their signatures. Every failure is a pipeplan.Error (a ValueError) with the
// message the library wrote, in the API's terms. The planner runs without the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "api.h"
#include "pipeplan/cli/main.h"
#include "pipeplan/planner/planner.h"

namespace nb = nanobind;

namespace pipeplan::python {
namespace {

// Raised as pipeplan.Error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename T>
T ValueOr(StatusOr<T> result) {
  if (!result.ok()) throw Error(result.status().message());
  return *std::move(result);
}

void OkOr(const Status& status) {
  if (!status.ok()) throw Error(status.message());
}

// The methods' arguments, checked as python/pipeplan/__init__.py checks the functions': a
// wrong type is a pipeplan.Error naming the argument (not nanobind's TypeError); nb::sig gives
// the stub and help() the types.
std::string Described(nb::handle value) {
  return std::string(nb::type_name(value.type()).c_str()) + " " + nb::repr(value).c_str();
}

int IntArg(const char* name, nb::handle value) {
  int out = 0;
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value)) {
    throw Error(std::string(name) + " must be an int, got " + Described(value));
  }
  if (!nb::try_cast(value, out)) {
    throw Error(std::string(name) + ": " + Described(value) + " is out of range");
  }
  return out;
}

bool BoolArg(const char* name, nb::handle value) {
  if (!nb::isinstance<nb::bool_>(value)) {
    throw Error(std::string(name) + " must be a bool, got " + Described(value));
  }
  return nb::cast<bool>(value);
}

std::optional<double> NumberArg(const char* name, nb::handle value) {
  if (value.is_none()) return std::nullopt;
  const bool number = nb::isinstance<nb::int_>(value) || nb::isinstance<nb::float_>(value);
  if (!number || nb::isinstance<nb::bool_>(value)) {
    throw Error(std::string(name) + " must be a number, got " + Described(value));
  }
  return nb::cast<double>(value);
}

// A str or an os.PathLike, as os.fspath takes it.
std::string PathArg(nb::handle value) {
  if (nb::isinstance<nb::str>(value)) return nb::cast<std::string>(value);
  const nb::module_ os = nb::module_::import_("os");
  if (!nb::isinstance(value, os.attr("PathLike"))) {
    throw Error("path must be a path (str or os.PathLike), got " + Described(value));
  }
  return nb::cast<std::string>(os.attr("fspath")(value));
}

// save(path), as every kind of file the package reads has it.
template <typename T, Status (*kSave)(const T&, const std::string&)>
void DefSave(nb::class_<T>& kind, const char* doc) {
  kind.def(
      "save", [](const T& value, nb::handle path) { OkOr(kSave(value, PathArg(path))); },
      nb::arg("path"), nb::sig("def save(self, path: str | os.PathLike[str]) -> None"), doc);
}

Status SavePlanOf(const PlanHandle& plan, const std::string& path) {
  return SavePlan(plan.plan, path);
}

std::string StrategyName(const Plan& plan) {
  return plan.provenance.strategy.empty() ? plan.request.strategy : plan.provenance.strategy;
}

std::vector<double> PerRank(const Timeline& timeline, double RankTimeline::*field) {
  std::vector<double> out;
  out.reserve(timeline.ranks.size());
  for (const RankTimeline& rank : timeline.ranks) out.push_back(rank.*field);
  return out;
}

template <typename T>
std::optional<T> Get(const nb::dict& args, const char* name) {
  if (!args.contains(name) || args[name].is_none()) return std::nullopt;
  return nb::cast<T>(args[name]);
}

// pipeplan.plan's and pipeplan.compare's request, as __init__.py passes it: a dict of the
// keyword arguments whose types it has checked (None or absent: not given).
PlanCall CallOf(const nb::dict& args) {
  PlanCall call;
  app::RequestValues& v = call.values;
  v.strategy = Get<std::string>(args, "strategy");
  v.ranks = Get<int64_t>(args, "ranks");
  v.microbatches = Get<int64_t>(args, "microbatches");
  v.stages_per_rank = Get<int64_t>(args, "stages_per_rank");
  v.microbatch_group_size = Get<int64_t>(args, "microbatch_group_size");
  v.forward = Get<double>(args, "forward");
  v.backward = Get<double>(args, "backward");
  v.backward_input = Get<double>(args, "backward_input");
  v.backward_weight = Get<double>(args, "backward_weight");
  v.overlap = Get<double>(args, "overlap");
  v.comm = Get<double>(args, "comm");
  v.receive_overhead = Get<double>(args, "receive_overhead");
  v.costs_file = Get<std::string>(args, "costs_file");
  v.costs_model = Get<CostModel>(args, "costs");
  v.memory_limit = Get<double>(args, "memory_limit");
  v.post_validation = Get<bool>(args, "post_validation").value_or(false);
  v.runtime = Get<std::string>(args, "runtime");
  call.memory_limit_text = Get<std::string>(args, "memory_limit_text");
  call.time_limit_s = Get<double>(args, "time_limit");
  return call;
}

nb::dict RowDict(const CompareRow& row) {
  nb::dict out;
  out["strategy"] = row.strategy;
  out["stages_per_rank"] = row.stages_per_rank;
  out["makespan"] = row.makespan;
  out["peak_memory"] = row.peak_memory;
  out["bubble"] = row.bubble;
  out["best"] = row.best;
  out["error"] = row.error;
  out["assumes"] = row.assumes;
  out["torch_csv_comms"] = row.torch_csv_comms;
  out["torch_csv"] = row.torch_csv;
  return out;
}

void BindPlan(nb::module_& m) {
  nb::class_<PlanHandle> plan(m, "Plan",
                              "A validated plan: per rank the ordered actions, with SEND/RECV "
                              "inserted. Made by pipeplan.plan or read by pipeplan.load.");
  plan.def_prop_ro(
          "strategy", [](const PlanHandle& p) { return StrategyName(p.plan); },
          "The strategy that made it ('1f1b', 'zbv', ...).")
      .def_prop_ro(
          "ranks", [](const PlanHandle& p) { return p.plan.request.topology.ranks; },
          "Pipeline ranks P.")
      .def_prop_ro(
          "stages_per_rank",
          [](const PlanHandle& p) { return p.plan.request.topology.stages_per_rank; },
          "Stages each rank holds, V.")
      .def_prop_ro(
          "microbatches", [](const PlanHandle& p) { return p.plan.request.topology.microbatches; },
          "Microbatches per step, M.")
      .def_prop_ro(
          "placement",
          [](const PlanHandle& p) {
            return std::string(PlacementName(p.plan.request.topology.placement));
          },
          "How stages sit on ranks: 'loop', 'v' or 'dual'.")
      .def_ro("notes", &PlanHandle::notes,
              "How the plan was chosen and what the planner estimated for it.")
      .def(
          "actions",
          [](const PlanHandle& p, nb::handle rank, nb::handle comms) {
            return ValueOr(ActionTokens(p.plan, IntArg("rank", rank), BoolArg("comms", comms)));
          },
          nb::arg("rank"), nb::arg("comms") = true,
          nb::sig("def actions(self, rank: int, comms: bool = True) -> list[str]"),
          "The rank's actions as torch pipelining tokens, in order: '0F0', '1SEND_F0', ... "
          "(comms=False: compute only, as torch's own lowering adds the transfers). A dual "
          "plan's second copy (stages P..2P-1) numbers its microbatches as the batch's, "
          "M/2..M-1: pipeplan.torch.schedule runs it; torch's own loaders cannot.")
      .def(
          "action_table",
          [](const PlanHandle& p, nb::handle comms) {
            return ValueOr(ActionTable(p.plan, BoolArg("comms", comms)));
          },
          nb::arg("comms") = true,
          nb::sig("def action_table(self, comms: bool = True) -> list[list[str]]"),
          "Every rank's actions(rank, comms), in rank order: torch's pipeline_order.")
      .def(
          "stage_indices",
          [](const PlanHandle& p, nb::handle rank) {
            return ValueOr(StageIndices(p.plan, IntArg("rank", rank)));
          },
          nb::arg("rank"), nb::sig("def stage_indices(self, rank: int) -> list[int]"),
          "The stages the rank holds, in its local order (what to build on it).")
      .def(
          "to_torch_csv",
          [](const PlanHandle& p, nb::handle comms) {
            return ValueOr(TorchCsv(p.plan, BoolArg("comms", comms)));
          },
          nb::arg("comms") = true, nb::sig("def to_torch_csv(self, comms: bool = True) -> str"),
          "The plan as torch's _PipelineScheduleRuntime._load_csv reads it "
          "(pipeplan export --format torch-csv-comms, or torch-csv with comms=False).")
      .def("__repr__", [](const PlanHandle& p) {
        const Topology& t = p.plan.request.topology;
        return "<pipeplan.Plan " + StrategyName(p.plan) + " P=" + std::to_string(t.ranks) +
               " V=" + std::to_string(t.stages_per_rank) + " M=" + std::to_string(t.microbatches) +
               ">";
      });
  DefSave<PlanHandle, SavePlanOf>(plan,
                                  "Writes the plan file (atomically; .json, .textproto or "
                                  "binary by the name), as 'pipeplan plan -o' does.");
}

void BindTimeline(nb::module_& m) {
  nb::class_<TimelineHandle> timeline(m, "Timeline",
                                      "When every action of a plan ran, simulated or measured, "
                                      "with per-rank busy time and peak memory.");
  timeline
      .def_prop_ro(
          "makespan", [](const TimelineHandle& t) { return t.timeline.metrics.makespan; },
          "The step time, in the costs' unit.")
      .def_prop_ro(
          "busy", [](const TimelineHandle& t) { return PerRank(t.timeline, &RankTimeline::busy); },
          "Per rank, the time it computed.")
      .def_prop_ro(
          "peak_memory",
          [](const TimelineHandle& t) { return PerRank(t.timeline, &RankTimeline::peak_memory); },
          "Per rank, the most it held: static + activations (bytes where the memory model "
          "counts bytes).")
      .def_prop_ro(
          "peak_activation_memory",
          [](const TimelineHandle& t) {
            return PerRank(t.timeline, &RankTimeline::peak_activation_memory);
          },
          "Per rank, the most activation memory it held.")
      .def_prop_ro(
          "bubble",
          [](const TimelineHandle& t) {
            std::vector<double> out;
            const double makespan = t.timeline.metrics.makespan;
            for (const RankTimeline& rank : t.timeline.ranks) {
              out.push_back(makespan > 0 ? 1.0 - rank.busy / makespan : 0.0);
            }
            return out;
          },
          "Per rank, the fraction of the step it was idle: 1 - busy / makespan.")
      .def_prop_ro(
          "measured",
          [](const TimelineHandle& t) { return t.timeline.source == TimelineSource::kMeasured; },
          "Whether a run measured it (else it was simulated).")
      .def_prop_ro(
          "metrics",
          [](const TimelineHandle& t) {
            const Metrics& metrics = t.timeline.metrics;
            nb::dict out;
            out["makespan"] = metrics.makespan;
            out["zb_bubble_rate"] = metrics.zb_bubble_rate;
            out["bubble_fraction_max"] = metrics.bubble_fraction_max;
            out["bubble_fraction_mean"] = metrics.bubble_fraction_mean;
            out["lower_bound"] = metrics.lower_bound;
            out["gap_to_lower_bound"] = metrics.gap_to_lower_bound;
            return out;
          },
          "The step's metrics, as 'pipeplan simulate --json' names them.")
      .def_prop_ro(
          "plan",
          [](const TimelineHandle& t) -> std::optional<PlanHandle> {
            if (!t.plan.has_value()) return std::nullopt;
            return PlanHandle{.plan = *t.plan, .timeline = {}, .notes = {}};
          },
          "The plan it is a timeline of, where it carries one.")
      .def_ro("notes", &TimelineHandle::notes,
              "What fitting the costs to the plan's stages estimated.")
      .def("__repr__", [](const TimelineHandle& t) {
        return std::string("<pipeplan.Timeline ") +
               (t.timeline.source == TimelineSource::kMeasured ? "measured" : "simulated") +
               " makespan=" + std::to_string(t.timeline.metrics.makespan) + ">";
      });
  DefSave<TimelineHandle, SaveTimeline>(
      timeline, "Writes the timeline file with its plan, as 'pipeplan simulate --timeline' does.");
}

void BindFigures(nb::module_& m) {
  nb::class_<CostModel> costs(m, "CostModel",
                              "Durations per stage (F, B, I, W, overlap), transfer latencies "
                              "per boundary, and a memory model where measured. From "
                              "pipeplan.load or pipeplan.calibrate; pipeplan.plan(costs=...) "
                              "takes it.");
  costs
      .def_prop_ro(
          "stages", [](const CostModel& c) { return c.stages.size(); },
          "Per-stage entries (1: the same for every stage).")
      .def_ro("time_unit", &CostModel::time_unit, "The durations' unit ('us', ...), if stated.")
      .def_prop_ro(
          "has_memory", [](const CostModel& c) { return c.memory.has_value(); },
          "Whether it brings a memory model (calibrated from a run that counted bytes).");
  DefSave<CostModel, SaveCostModel>(costs,
                                    "Writes the cost file, as 'pipeplan calibrate -o' does.");
  nb::class_<TimelineDiff>(m, "Diff",
                           "Two timelines of one plan side by side (pipeplan.diff): step time, "
                           "per-rank busy time and peak memory, start errors.")
      .def_ro("expected_makespan", &TimelineDiff::step_expected, "The expected step.")
      .def_ro("measured_makespan", &TimelineDiff::step_actual, "The measured step.")
      .def_ro("makespan_error", &TimelineDiff::relative_error,
              "measured / expected - 1: +0.05 is a step 5% longer than expected.")
      .def_ro("mean_abs_start_error", &TimelineDiff::mean_abs_start_error,
              "The mean |measured - expected| start of the compute actions.")
      .def_prop_ro(
          "peak_memory_error",
          [](const TimelineDiff& d) {
            std::vector<double> out;
            for (const RankDiff& rank : d.ranks) {
              out.push_back(rank.peak_memory_expected > 0
                                ? rank.peak_memory_actual / rank.peak_memory_expected - 1
                                : 0.0);
            }
            return out;
          },
          "Per rank, measured / expected peak memory - 1 (meaningful where both count bytes: "
          "memory_in_bytes).")
      .def_ro("memory_in_bytes", &TimelineDiff::memory_in_bytes,
              "Whether both timelines count memory in bytes.");
  nb::class_<PlanRequest> request(m, "Request",
                                  "A request file's request: strategy, topology, costs, memory "
                                  "(pipeplan.load of a file 'pipeplan plan --request' reads).");
  request.def_ro("strategy", &PlanRequest::strategy, "The strategy it asks for.")
      .def_prop_ro(
          "ranks", [](const PlanRequest& r) { return r.topology.ranks; }, "Pipeline ranks P.")
      .def_prop_ro(
          "stages_per_rank", [](const PlanRequest& r) { return r.topology.stages_per_rank; },
          "V (0: the strategy's own).")
      .def_prop_ro(
          "microbatches", [](const PlanRequest& r) { return r.topology.microbatches; },
          "Microbatches per step, M.")
      .def(
          "plan",
          [](const PlanRequest& r, nb::handle time_limit) {
            const std::optional<double> seconds = NumberArg("time_limit", time_limit);
            nb::gil_scoped_release unlocked;
            return ValueOr(MakePlanFromRequest(r, seconds));
          },
          nb::arg("time_limit") = nb::none(),
          nb::sig("def plan(self, time_limit: float | None = None) -> Plan"),
          "The request's plan, as 'pipeplan plan --request FILE' makes it; time_limit: the "
          "solver's seconds (solver-made strategies only).");
  DefSave<PlanRequest, SaveRequest>(request,
                                    "Writes the request file 'pipeplan plan --request' reads.");
  nb::class_<Profile> profile(m, "Profile",
                              "Per stage and kind the spread of measured durations, per "
                              "boundary the transfer times (pipeplan.profile).");
  profile.def_ro("steps", &Profile::steps, "Steps profiled.")
      .def_ro("source", &Profile::source, "'measured' or 'simulated'.")
      .def_prop_ro(
          "stages", [](const Profile& p) { return p.stages.size(); }, "Stages profiled.");
  DefSave<Profile, SaveProfile>(profile, "Writes the profile file, as 'pipeplan profile -o' does.");
}

PartitionCall PartitionCallOf(const nb::dict& args) {
  PartitionCall call;
  call.layers_path = Get<std::string>(args, "layers_path");
  call.layers_json = Get<std::string>(args, "layers_json");
  call.ranks = Get<int64_t>(args, "ranks");
  call.microbatches = Get<int64_t>(args, "microbatches");
  call.strategy = Get<std::string>(args, "strategy").value_or("auto");
  call.stages_per_rank = Get<int64_t>(args, "stages_per_rank");
  call.memory_limit = Get<double>(args, "memory_limit");
  call.memory_limit_text = Get<std::string>(args, "memory_limit_text");
  call.comm = Get<double>(args, "comm").value_or(0.0);
  call.runtime = Get<std::string>(args, "runtime");
  return call;
}

void BindSplit(nb::module_& m) {
  nb::class_<SplitHandle> split(m, "Split",
                                "Which layers each stage holds, chosen with the strategy and V "
                                "(pipeplan.partition), and its plan.");
  split.def_ro("plan", &SplitHandle::plan, "The plan of the split: its strategy, V, actions.")
      .def_ro("stages", &SplitHandle::stages,
              "The layer names each stage holds, in stage order (torchtitan's "
              "module_fqns_per_model_part).")
      .def_prop_ro(
          "makespan",
          [](const SplitHandle& s) {
            return s.plan.timeline.has_value() ? s.plan.timeline->metrics.makespan : 0.0;
          },
          "The simulated step, in the layer costs' time unit.")
      .def_prop_ro(
          "peak_memory",
          [](const SplitHandle& s) {
            return s.plan.timeline.has_value()
                       ? PerRank(*s.plan.timeline, &RankTimeline::peak_memory)
                       : std::vector<double>{};
          },
          "Per rank the most it holds (bytes where the layers give memory).")
      .def_ro("megatron_layout", &SplitHandle::megatron_layout,
              "Megatron's --pipeline-model-parallel-layout, or None where it cannot hold the "
              "split.")
      .def_ro("even_strategy", &SplitHandle::even_strategy,
              "The even split's best strategy (None where nothing fits evenly).")
      .def_ro("even_stages_per_rank", &SplitHandle::even_stages_per_rank, "Its V.")
      .def_ro("even_makespan", &SplitHandle::even_makespan, "Its simulated step.")
      .def_ro("even_same_strategy_makespan", &SplitHandle::even_same_strategy_makespan,
              "The even split's step with this split's strategy and V.")
      .def_ro("plans_simulated", &SplitHandle::plans_simulated, "Plans the search simulated.")
      .def_ro("exhaustive", &SplitHandle::exhaustive,
              "How many splits were weighed where every one was (the split is then the best for "
              "its strategy and V), else 0.")
      .def_ro("time_unit", &SplitHandle::time_unit, "The layer costs' time unit.")
      .def("__repr__", [](const SplitHandle& s) {
        return "<pipeplan.Split " + s.plan.plan.request.strategy +
               " V=" + std::to_string(s.plan.plan.request.topology.stages_per_rank) + " " +
               std::to_string(s.stages.size()) + " stages>";
      });
}

void BindFunctions(nb::module_& m) {
  m.def(
      "partition",
      [](const nb::dict& args) {
        const PartitionCall call = PartitionCallOf(args);
        nb::gil_scoped_release unlocked;
        return ValueOr(PartitionFor(call));
      },
      nb::arg("args"));
  m.def(
      "plan",
      [](const nb::dict& args) {
        const PlanCall call = CallOf(args);
        nb::gil_scoped_release unlocked;
        return ValueOr(MakePlanFor(call));
      },
      nb::arg("args"));
  m.def(
      "compare",
      [](const nb::dict& args) {
        const PlanCall call = CallOf(args);
        StatusOr<std::vector<CompareRow>> rows = [&] {
          nb::gil_scoped_release unlocked;
          return Compare(call);
        }();
        nb::list out;
        for (const CompareRow& row : ValueOr(std::move(rows))) out.append(RowDict(row));
        return out;
      },
      nb::arg("args"));
  m.def(
      "simulate",
      [](const PlanHandle& plan, const std::optional<CostModel>& costs,
         const std::optional<std::string>& runtime, const std::optional<std::string>& format) {
        nb::gil_scoped_release unlocked;
        return ValueOr(SimulatePlan(plan, costs, runtime, format));
      },
      nb::arg("plan"), nb::arg("costs").none(), nb::arg("runtime").none(),
      nb::arg("export").none());
  m.def(
      "load", [](const std::string& path) { return ValueOr(LoadFile(path)); }, nb::arg("path"));
  m.def(
      "profile",
      [](const std::vector<TimelineHandle>& timelines, std::optional<double> time_scale) {
        return ValueOr(ProfileOf(timelines, time_scale));
      },
      nb::arg("timelines"), nb::arg("time_scale").none());
  m.def(
      "calibrate",
      [](const Profile& profile, const std::string& unit) {
        return ValueOr(CalibrateProfile(profile, unit));
      },
      nb::arg("profile"), nb::arg("unit"));
  m.def(
      "import_torch_traces",
      [](const std::vector<std::string>& paths, const std::optional<PlanHandle>& plan,
         std::optional<int> step) {
        nb::gil_scoped_release unlocked;
        return ValueOr(ImportTorchTraces(paths, plan, step));
      },
      nb::arg("paths"), nb::arg("plan").none(), nb::arg("step").none());
  m.def(
      "import_layer_traces",
      [](const std::vector<std::string>& paths) {
        nb::gil_scoped_release unlocked;
        return ValueOr(ImportLayerTraces(paths));
      },
      nb::arg("paths"));
  m.def(
      "diff",
      [](const TimelineHandle& expected, const TimelineHandle& measured) {
        return ValueOr(DiffOf(expected, measured));
      },
      nb::arg("expected"), nb::arg("measured"));
  m.def(
      "main", [](const std::vector<std::string>& words) { return cli::Main(words); },
      nb::arg("words"), "Runs the pipeplan command with these words (argv[1:]).");
  m.attr("__version__") = std::string(ToolVersion());
}

}  // namespace
}  // namespace pipeplan::python

NB_MODULE(_core, m) {
  using namespace pipeplan::python;  // NOLINT(google-build-using-namespace): the module's scope
  m.doc() = "pipeplan's C++ core; use the functions of the pipeplan package.";
  // Registers the Python type and the translation of Error to it; nothing is thrown here.
  const nb::exception<Error> error_type(m, "Error",  // NOLINT(bugprone-throw-keyword-missing)
                                        PyExc_ValueError);
  BindPlan(m);
  BindTimeline(m);
  BindFigures(m);
  BindSplit(m);
  BindFunctions(m);
}
