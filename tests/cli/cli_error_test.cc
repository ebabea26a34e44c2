// End-to-end tests of the pipeplan command's errors: malformed inputs with the exact message
// and exit code a user gets, and nothing written.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/planner/plannable.h"
#include "pipeplan/strategies/strategy.h"

namespace pipeplan::cli_test {
namespace {

// A small valid 1f1b plan in text format is produced by the tool itself where needed; these
// are hand-written broken files.
constexpr char kMalformedTextPlan[] = "programs { rank: 0 actions { kind: FORWARD stage: ";
constexpr char kUnspecifiedKindPlan[] = R"(request {
  topology { ranks: 1 stages_per_rank: 1 microbatches: 1 placement: PLACEMENT_LOOP }
  strategy: "handmade"
}
programs {
  rank: 0
  actions { kind: FORWARD stage: 0 microbatch: 0 }
  actions { kind: ACTION_KIND_UNSPECIFIED stage: 0 microbatch: 0 }
}
)";
constexpr char kBackwardFirstPlan[] = R"(request {
  topology { ranks: 1 stages_per_rank: 1 microbatches: 1 placement: PLACEMENT_LOOP }
  strategy: "handmade"
}
programs {
  rank: 0
  actions { kind: BACKWARD stage: 0 microbatch: 0 }
  actions { kind: FORWARD stage: 0 microbatch: 0 }
}
)";
constexpr char kMalformedJsonRequest[] = R"({"topology": {"ranks": 4, "microbatches": )";
constexpr char kUnknownFigureScopeRequest[] =
    "topology { ranks: 2 microbatches: 4 } costs { stages { forward: 1 backward: 2 } } "
    "figures: 7";
constexpr char kBwCsv[] = "0F0,0F1,0BW0,0BW1\n";
constexpr char kOutOfRangeCsv[] = "0F0,0F1,0B0,0B1\n";

struct ErrorCase {
  std::string name;
  std::vector<std::string> args;
  std::map<std::string, std::string> files;  // written into the scratch dir first
  std::string expected_err;
  int expected_exit = 0;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

const std::vector<ErrorCase>& ErrorCases() {
  static const std::vector<ErrorCase> cases = {
      // Usage errors (exit 2): the command line itself is wrong.
      {"UnknownSubcommand",
       {"frobnicate"},
       {},
       Usage("",
             "unknown command 'frobnicate' (expected plan, simulate, export, import, compare, "
             "partition, run, diff, profile, calibrate or demo)"),
       2},
      {"UnknownFlag",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--frobnicate", "1"},
       {},
       Usage("plan", "unknown flag '--frobnicate'"),
       2},
      {"MissingRanksValue",
       {"plan", "--strategy", "1f1b", "--microbatches", "8", "--ranks"},
       {},
       Usage("plan", "missing value for --ranks"),
       2},
      {"MissingValueBeforeNextFlag",
       {"plan", "--strategy", "1f1b", "--ranks", "--microbatches", "8"},
       {},
       Usage("plan", "missing value for --ranks"),
       2},
      {"NonNumericRanks",
       {"plan", "--strategy", "1f1b", "--ranks", "abc", "--microbatches", "8"},
       {},
       Usage("plan", "--ranks: expected an integer, got 'abc'"),
       2},
      {"ZeroRanks",
       {"plan", "--strategy", "1f1b", "--ranks", "0", "--microbatches", "8"},
       {},
       Usage("plan", "--ranks must be >= 1, got 0"),
       2},
      {"FractionalMicrobatches",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches=2.5"},
       {},
       Usage("plan", "--microbatches: expected an integer, got '2.5'"),
       2},
      {"MissingRequiredFlag",
       {"plan", "--strategy", "1f1b", "--ranks", "4"},
       {},
       Usage("plan", "missing required flag --microbatches"),
       2},
      {"UnknownStrategy",
       {"plan", "--strategy", "2f2b", "--ranks", "4", "--microbatches", "8"},
       {},
       // The list is the catalogue's, whatever it holds.
       Usage("plan", "unknown strategy '2f2b' (known: " + PlannableStrategyNames() + ")"),
       2},
      {"NegativeForward",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--forward", "-1"},
       {},
       Usage("plan", "--forward must be >= 0, got -1"),
       2},
      {"NegativeReceiveOverhead",
       {"compare", "--ranks", "4", "--microbatches", "8", "--receive-overhead", "-0.5"},
       {},
       Usage("compare", "--receive-overhead must be >= 0, got -0.5"),
       2},
      {"NonNumericComm",
       {"compare", "--ranks", "4", "--microbatches", "8", "--comm", "fast"},
       {},
       Usage("compare", "--comm: expected a number, got 'fast'"),
       2},
      {"InfiniteBackward",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--backward", "inf"},
       {},
       Usage("plan", "--backward: expected a number, got 'inf'"),
       2},
      {"InputLargerThanBackward",
       {"plan", "--strategy", "zb-h1", "--ranks", "4", "--microbatches", "8", "--backward", "2",
        "--backward-input", "3"},
       {},
       Usage("plan",
             "--backward-input (3) cannot exceed --backward (2) when --backward-weight is not "
             "given"),
       2},
      {"CostsFileAndDurationFlags",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--costs", "c.txt",
        "--forward", "2"},
       {},
       Usage("plan",
             "--costs cannot be combined with --forward, --backward, --backward-input, "
             "--backward-weight, --overlap, --comm or --receive-overhead"),
       2},
      {"CostsFileAndOverlap",
       {"compare", "--ranks", "4", "--microbatches", "8", "--costs", "c.txt", "--overlap", "2"},
       {},
       Usage("compare",
             "--costs cannot be combined with --forward, --backward, --backward-input, "
             "--backward-weight, --overlap, --comm or --receive-overhead"),
       2},
      {"ZeroOverlap",
       {"plan", "--strategy", "1f1b-overlap", "--ranks", "4", "--microbatches", "8", "--overlap",
        "0"},
       {},
       Usage("plan", "--overlap must be > 0, got 0 (leave it out for F + B)"),
       2},
      {"NegativeOverlap",
       {"import", "--format", "torch-csv", "s.csv", "--overlap", "-2"},
       {},
       Usage("import", "--overlap must be >= 0, got -2"),
       2},
      {"PostValidationTakesNoValue",
       {"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches", "8",
        "--post-validation=yes"},
       {},
       Usage("plan", "--post-validation takes no value"),
       2},
      {"RequestAndPostValidation",
       {"plan", "--request", "r.json", "--post-validation"},
       {},
       Usage("plan",
             "--request cannot be combined with --post-validation (the file holds the whole "
             "request)"),
       2},
      {"AutoWithGroupSize",
       {"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8",
        "--microbatch-group-size", "4"},
       {},
       Usage("plan",
             "--microbatch-group-size does not apply to --strategy auto (auto tries the group "
             "sizes itself)"),
       2},
      {"RequestAndRanks",
       {"plan", "--request", "r.json", "--ranks", "4"},
       {},
       Usage("plan",
             "--request cannot be combined with --ranks (the file holds the whole request)"),
       2},
      {"FlagGivenTwice",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--ranks=5", "--microbatches", "8"},
       {},
       Usage("plan", "--ranks given more than once"),
       2},
      {"ValueForBooleanFlag",
       {"simulate", "plan.pb", "--json=yes"},
       {},
       Usage("simulate", "--json takes no value"),
       2},
      {"SimulateWithoutPlan",
       {"simulate", "--json"},
       {},
       Usage("simulate", "missing the plan file (pipeplan simulate PLAN)"),
       2},
      {"SimulateTwoPlans",
       {"simulate", "a.pb", "b.pb"},
       {},
       Usage("simulate", "unexpected argument 'b.pb'"),
       2},
      {"ExportUnknownFormat",
       {"export", "plan.pb", "--format", "yaml"},
       {},
       Usage("export",
             "unknown --format 'yaml' (expected torch-csv, torch-csv-comms, textproto or json)"),
       2},
      {"ExportWithoutFormat",
       {"export", "plan.pb"},
       {},
       Usage("export", "missing required flag --format"),
       2},
      {"ImportUnknownFormat",
       {"import", "--format", "csv", "s.csv"},
       {},
       Usage("import",
             "unknown --format 'csv' (expected torch-csv, torch-csv-comms, torch-trace or "
             "torch-layer-trace)"),
       2},
      {"ImportLayerTracesTakeNoPlan",
       {"import", "--format", "torch-layer-trace", "t.json", "--forward", "2"},
       {},
       Usage("import",
             "--forward is not for --format torch-layer-trace (it writes the layers' figures, "
             "no plan)"),
       2},
      {"ImportLayerTracesNeedFiles",
       {"import", "--format", "torch-layer-trace"},
       {},
       Usage("import",
             "expected the trace files, one per rank (pipeplan import --format "
             "torch-layer-trace TRACE...)"),
       2},
      {"ImportTracesNeedFiles",
       {"import", "--format", "torch-trace"},
       {},
       Usage("import",
             "expected the trace files, one per rank (pipeplan import --format "
             "torch-trace TRACE...)"),
       2},
      {"ImportStepIsForTraces",
       {"import", "--format", "torch-csv", "--step", "2", "s.csv"},
       {},
       Usage("import", "--step is for --format torch-trace"),
       2},
      {"ImportTraceNotJson",
       {"import", "--format", "torch-trace", "t.json"},
       {{"t.json", "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"PP:0F0\"}"}},
       "pipeplan import: error: t.json: traceEvents: malformed or truncated after event 0: The "
       "JSON document has an improper structure: missing or superfluous commas, braces, "
       "missing keys, etc.\n",
       1},
      {"ImportTraceBadGzip",
       {"import", "--format", "torch-trace", "t.json.gz"},
       {{"t.json.gz", std::string("\x1f\x8b\x08\x00not gzip at all", 19)}},
       "pipeplan import: error: cannot read 't.json.gz': corrupt or truncated gzip data "
       "(invalid stored block lengths)\n",
       1},
      {"DemoUnexpectedArgument",
       {"demo", "now"},
       {},
       Usage("demo", "unexpected argument 'now'"),
       2},

      // Input errors (exit 1): the command line is fine, the input cannot be served.
      {"NonexistentPlanFile",
       {"simulate", "missing.pb"},
       {},
       Input("simulate", "cannot read 'missing.pb': No such file or directory"),
       1},
      {"PlanFileIsADirectory",
       {"export", "dir", "--format", "json"},
       {{"dir/keep", ""}},
       Input("export", "cannot read 'dir': is a directory"),
       1},
      {"MalformedTextPlan",
       {"simulate", "bad.textproto"},
       {{"bad.textproto", kMalformedTextPlan}},
       Input("simulate", "bad.textproto: plan file: line 1, column 51: Expected integer, got: "),
       1},
      {"UnspecifiedActionKind",
       {"simulate", "kind.textproto"},
       {{"kind.textproto", kUnspecifiedKindPlan}},
       Input("simulate",
             "kind.textproto: plan file: programs[0].actions[1].kind: unspecified action kind"),
       1},
      {"BackwardBeforeForward",
       {"simulate", "order.textproto"},
       {{"order.textproto", kBackwardFirstPlan}},
       Input("simulate", "order.textproto: rank 0, action 0 (0B0): backward before forward"),
       1},
      {"MalformedJsonRequest",
       {"plan", "--request", "request.json"},
       {{"request.json", kMalformedJsonRequest}},
       Input("plan", "request.json: request file: Unexpected end of string. Expected a value."),
       1},
      {"UnknownFigureScopeInARequest",
       {"plan", "--request", "request.textproto", "-o", "plan.pb"},
       {{"request.textproto", kUnknownFigureScopeRequest}},
       Input("plan", "request.textproto: request file: figures: unknown figure scope 7"),
       1},
      {"CompareRanksOutOfRange",
       {"compare", "--ranks", "5000", "--microbatches", "4"},
       {},
       Input("compare", "ranks must be in 1..4096, got 5000"),
       1},
      {"CsvWithBwToken",
       {"import", "--format", "torch-csv", "bw.csv"},
       {{"bw.csv", kBwCsv}},
       Input("import",
             "bw.csv: rank 0, cell 2: '0BW0' is torch's legacy full-backward token; use '0B0'"),
       1},
      {"CsvMicrobatchOutOfRange",
       {"import", "--format", "torch-csv", "range.csv", "--microbatches", "1"},
       {{"range.csv", kOutOfRangeCsv}},
       Input("import", "range.csv: rank 0, cell 1: microbatch 1 out of range 0..0"),
       1},
      {"ZbH2NeedsTwicePMicrobatches",
       {"plan", "--strategy", "zb-h2", "--ranks", "4", "--microbatches", "4"},
       {},
       Input("plan", "zb-h2 needs at least 2P microbatches: P=4 needs M >= 8, got M=4"),
       1},
      {"BadMicrobatchGroupSize",
       {"plan", "--strategy", "interleaved-1f1b", "--ranks", "4", "--microbatches", "8",
        "--microbatch-group-size", "3"},
       {},
       Input(
           "plan",
           "interleaved-1f1b: microbatch group size 3 with P=4, M=8 is invalid: need P <= G <= M"),
       1},
      {"GroupSizeForNonInterleavedStrategy",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8",
        "--microbatch-group-size", "4"},
       {},
       Input("plan", "--microbatch-group-size applies to interleaved-1f1b only, not 1f1b"),
       1},
      {"CompareWhereNoStrategyFits",
       {"compare", "--ranks", "4", "--microbatches", "8", "--memory-limit", "0.5"},
       {},
       Input("compare", "no strategy could plan this request"),
       1},
      {"PostValidationOutsideTheZeroBubbleFamily",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--post-validation",
        "-o", "p.pb"},
       {},
       // The library's message (Normalize) names the field; the CLI, the flag.
       Input("plan",
             "--post-validation applies to the zero-bubble family (zb-h1, zb-h2, zb, zb-1p, "
             "zb-2p, interleaved-zb, zbv-handcrafted, zbv, v-half, v-min), not 1f1b"),
       1},
      {"PostValidationOnDualPipe",
       {"plan", "--strategy", "dualpipe", "--ranks", "4", "--microbatches", "8",
        "--post-validation"},
       {},
       Input("plan",
             "--post-validation applies to the zero-bubble family (zb-h1, zb-h2, zb, zb-1p, "
             "zb-2p, interleaved-zb, zbv-handcrafted, zbv, v-half, v-min), not dualpipe"),
       1},
      {"TooManyRanks",
       {"plan", "--strategy", "1f1b", "--ranks", "5000", "--microbatches", "8"},
       {},
       Input("plan", "ranks must be in 1..4096, got 5000"),
       1},
      // Each dimension is in range; their product is not (the planner's request validation).
      {"TooManyComputeActions",
       {"plan", "--strategy", "interleaved-1f1b", "--ranks", "4096", "--stages-per-rank", "64",
        "--microbatches", "65536"},
       {},
       Input("plan",
             "P x V x M = 4096 x 64 x 65536 = 17179869184 (stage, microbatch) pairs, up to "
             "51539607552 compute actions (F, I and W each), above the cap of 100000000 compute "
             "actions"),
       1},
      {"TooManyComputeActionsInARequestFile",
       {"plan", "--request", "request.json"},
       {{"request.json",
         R"({"strategy": "1f1b", "topology": {"ranks": 2048, "microbatches": 65536}})"}},
       Input("plan",
             "P x V x M = 2048 x 1 x 65536 = 134217728 (stage, microbatch) pairs, up to "
             "402653184 compute actions (F, I and W each), above the cap of 100000000 compute "
             "actions"),
       1},
      {"MemoryLimitTooSmall",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--memory-limit", "1"},
       {},
       Input("plan", "1f1b needs 4 memory on rank 0, above the memory limit 1"),
       1},
      {"MemoryLimitWithAnUnknownUnit",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--memory-limit",
        "70Gb"},
       {},
       Usage("plan",
             "--memory-limit: unknown unit 'Gb' in '70Gb' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; "
             "or a plain number in the memory model's unit)"),
       2},
      {"MemoryLimitPerRankOutsidePartition",
       {"compare", "--ranks", "4", "--microbatches", "8", "--memory-limit", "5,6,7,8"},
       {},
       Usage("compare",
             "--memory-limit: one limit for every rank here, got the list '5,6,7,8' (a limit "
             "per rank is for pipeplan partition)"),
       2},
      {"MemoryLimitInBytesWithoutAModelInBytes",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--memory-limit",
        "70GiB"},
       {},
       Input("plan",
             "--memory-limit 70.0 GiB is in bytes, but the memory model counts microbatch "
             "activations: give a cost file with memory in bytes (--costs, from 'pipeplan "
             "calibrate' of a profile that counted bytes: a pipeplan-torch run, or "
             "torch.profiler traces imported with profile_memory=True), or the limit as a "
             "plain number of activations"),
       1},
      {"StrategyNeedsMoreStagesPerRank",
       {"plan", "--strategy", "interleaved-1f1b", "--ranks", "4", "--microbatches", "8",
        "--stages-per-rank", "1"},
       {},
       Input("plan", "interleaved-1f1b needs --stages-per-rank >= 2, got 1"),
       1},
      {"StrategyNeedsMoreStagesPerRankInARequestFile",
       {"plan", "--request", "request.json"},
       {{"request.json",
         R"({"strategy": "interleaved-1f1b", "topology": {"ranks": 4, "microbatches": 8, )"
         R"("stages_per_rank": 1}})"}},
       // A request file's errors name its fields.
       Input("plan", "interleaved-1f1b needs topology.stages_per_rank >= 2, got 1"),
       1},
      {"PostValidationOutsideTheZeroBubbleFamilyInARequestFile",
       {"plan", "--request", "request.json"},
       {{"request.json", R"({"strategy": "1f1b", "topology": {"ranks": 4, "microbatches": 8}, )"
                         R"("options": {"post_validation": true}})"}},
       Input("plan",
             "options.post_validation applies to the zero-bubble family (zb-h1, zb-h2, zb, "
             "zb-1p, zb-2p, interleaved-zb, zbv-handcrafted, zbv, v-half, v-min), not 1f1b"),
       1},
      {"MalformedCostsFile",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--costs",
        "costs.json"},
       {{"costs.json", "{\"stages\": [{\"forward\": \"fast\"}]}"}},
       Input("plan",
             "costs.json: cost file: (stages[0].forward): invalid value \"fast\" for type "
             "TYPE_DOUBLE"),
       1},
      {"TimeLimitZero",
       {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "2", "--time-limit",
        "0"},
       {},
       Usage("plan", "--time-limit must be a number of seconds > 0, got 0"),
       2},
      {"CompareTimeLimitZero",
       {"compare", "--ranks", "2", "--microbatches", "2", "--optimal", "--time-limit", "0"},
       {},
       Usage("compare", "--time-limit must be a number of seconds > 0, got 0"),
       2},
      {"TimeLimitNegative",
       {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "2", "--time-limit",
        "-5"},
       {},
       Usage("plan", "--time-limit must be a number of seconds > 0, got -5"),
       2},
      {"TimeLimitNotANumber",
       {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "2", "--time-limit",
        "soon"},
       {},
       Usage("plan", "--time-limit: expected a number, got 'soon'"),
       2},
      {"TimeLimitOnAHeuristic",
       {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "--time-limit", "5"},
       {},
       Input("plan",
             "--time-limit applies to optimal, optimal-v, optimal-fb and auto --optimal only, "
             "not 1f1b"),
       1},
      {"PeriodicOnAHeuristic",
       {"plan", "--strategy", "zb", "--ranks", "2", "--microbatches", "2", "--periodic"},
       {},
       Input(
           "plan",
           "--periodic applies to optimal, optimal-v, optimal-fb and auto --optimal only, not zb"),
       1},
      {"OptimalOnOneStrategy",
       {"plan", "--strategy", "optimal-v", "--ranks", "2", "--microbatches", "2", "--optimal"},
       {},
       Input("plan", "--optimal applies to strategy auto only (optimal-v is solver-made already)"),
       1},
      {"AutoOptimalWithPostValidation",
       {"plan", "--strategy", "auto", "--ranks", "2", "--microbatches", "2", "--optimal",
        "--post-validation"},
       {},
       Input("plan",
             "--optimal: the solver-made strategies insert no post-validation "
             "(--post-validation); plan auto with it without the solver"),
       1},
      {"CompareTimeLimitWithoutOptimal",
       {"compare", "--ranks", "2", "--microbatches", "2", "--time-limit", "5"},
       {},
       Usage("compare", "--time-limit needs --optimal"),
       2},
      {"CompareOptimalWithPostValidation",
       {"compare", "--ranks", "2", "--microbatches", "2", "--optimal", "--post-validation"},
       {},
       Usage("compare",
             "--optimal cannot be combined with --post-validation (the solver-made strategies "
             "do not insert post-validation)"),
       2},
      {"OptimalOverTheSolversSize",
       {"plan", "--strategy", "optimal", "--ranks", "1400", "--microbatches", "8"},
       {},
       Input("plan",
             "the optimal strategies solve at most 4000 compute ops at once; one microbatch of "
             "P=1400 V=1 has 4200 (the periodic solve's unit; fewer ranks or stages)"),
       1},
      {"OutputIsADirectory",
       {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "dir"},
       {{"dir/keep", ""}},
       Input("plan", "cannot write 'dir': is a directory"),
       1},
      {"DemoOutputDirUnderAFile",
       {"demo", "--output-dir", "file.txt/report"},
       {{"file.txt", "not a directory"}},
       Input("demo", "cannot create directory 'file.txt/report': Not a directory"),
       1},
  };
  return cases;
}

class CliErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CliErrorTest, PrintsExactErrorAndExitCode) {
  const ErrorCase& c = GetParam();
  ScratchDir dir;
  for (const auto& [name, content] : c.files) dir.Write(name, content);
  const std::vector<std::string> before = dir.List();

  const RunResult result = RunPipeplan(c.args, dir.path());
  EXPECT_EQ(result.exit_code, c.expected_exit);
  EXPECT_EQ(result.err, c.expected_err);
  // A failed command writes nothing: no outputs, no temp files.
  EXPECT_EQ(dir.List(), before);
}

INSTANTIATE_TEST_SUITE_P(Table, CliErrorTest, ::testing::ValuesIn(ErrorCases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& param) {
                           return param.param.name;
                         });

TEST(CliErrorTableTest, HasAtLeastTwentyCasesOfEachKind) {
  const auto& cases = ErrorCases();
  const auto usage = std::count_if(cases.begin(), cases.end(),
                                   [](const ErrorCase& c) { return c.expected_exit == 2; });
  const auto input = std::count_if(cases.begin(), cases.end(),
                                   [](const ErrorCase& c) { return c.expected_exit == 1; });
  EXPECT_GE(usage + input, 20);
  EXPECT_GE(usage, 10);
  EXPECT_GE(input, 10);
}

}  // namespace
}  // namespace pipeplan::cli_test
