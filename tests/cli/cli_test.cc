// End-to-end tests of the pipeplan command: malformed inputs with the exact message and exit
// code a user gets, and the plan -> simulate -> export -> import round trip.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"
#include "pipeplan/planner/strategy.h"

namespace pipeplan::cli_test {
namespace {

// "pipeplan <command>: error: <message>" plus the pointer to --help; exit code 2.
std::string Usage(const std::string& command, const std::string& message) {
  const std::string prefix = command.empty() ? "pipeplan" : "pipeplan " + command;
  return prefix + ": error: " + message + "\nrun '" + prefix + " --help' for usage\n";
}

// "pipeplan <command>: error: <message>"; exit code 1.
std::string Input(const std::string& command, const std::string& message) {
  return "pipeplan " + command + ": error: " + message + "\n";
}

// The number after "key": in a flat JSON object.
double JsonNumber(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << key << " in " << json;
    return -1;
  }
  return std::strtod(json.c_str() + at + needle.size(), nullptr);
}

// The numbers of "key":[a,b,...].
std::vector<double> JsonNumbers(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":[";
  const size_t at = json.find(needle);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no array " << key << " in " << json;
    return {};
  }
  std::vector<double> values;
  const char* p = json.c_str() + at + needle.size();
  while (*p != ']' && *p != '\0') {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = end;
    if (*p == ',') ++p;
  }
  return values;
}

// The whitespace-separated words of the first line of `text` whose words start with
// `prefix` (e.g. {"*", "zbv"} or {"3", "dualpipe", "2"}); empty when there is none.
std::vector<std::string> LineStartingWith(const std::string& text,
                                          const std::vector<std::string>& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.size() >= prefix.size() &&
        std::equal(prefix.begin(), prefix.end(), tokens.begin())) {
      return tokens;
    }
  }
  return {};
}

// The makespan printed by `simulate --json` for a plan built by `plan_args` (plus -o p.pb).
double PlannedMakespan(std::vector<std::string> plan_args, const ScratchDir& dir) {
  plan_args.insert(plan_args.end(), {"-o", "p.pb"});
  const RunResult plan = RunPipeplan(plan_args, dir.path());
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult sim = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  return JsonNumber(sim.out, "makespan");
}

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
             "run, diff, profile, calibrate or demo)"),
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
       Usage("plan", "unknown strategy '2f2b' (known: " + StrategyNames() + ")"),
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
       Usage("import", "unknown --format 'csv' (expected torch-csv or torch-csv-comms)"),
       2},
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
       // The library's message (NormalizeRequest), passed through unchanged.
       Input("plan",
             "--post-validation applies to the zero-bubble family (zb, zb-1p, zb-2p, zb-h1, "
             "zb-h2, interleaved-zb, zbv, zbv-handcrafted, v-half, v-min), not 1f1b"),
       1},
      {"PostValidationOnDualPipe",
       {"plan", "--strategy", "dualpipe", "--ranks", "4", "--microbatches", "8",
        "--post-validation"},
       {},
       Input("plan",
             "--post-validation applies to the zero-bubble family (zb, zb-1p, zb-2p, zb-h1, "
             "zb-h2, interleaved-zb, zbv, zbv-handcrafted, v-half, v-min), not dualpipe"),
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
      {"StrategyNeedsMoreStagesPerRank",
       {"plan", "--strategy", "interleaved-1f1b", "--ranks", "4", "--microbatches", "8",
        "--stages-per-rank", "1"},
       {},
       Input("plan", "interleaved-1f1b needs --stages-per-rank >= 2, got 1"),
       1},
      {"MalformedCostsFile",
       {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--costs",
        "costs.json"},
       {{"costs.json", "{\"stages\": [{\"forward\": \"fast\"}]}"}},
       Input("plan",
             "costs.json: cost file: (stages[0].forward): invalid value \"fast\" for type "
             "TYPE_DOUBLE"),
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

TEST(CliTest, NoCommandIsAUsageError) {
  ScratchDir dir;
  const RunResult result = RunPipeplan({}, dir.path());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(result.err.starts_with("pipeplan: error: missing command\nusage: pipeplan"))
      << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(CliTest, HelpForToolAndEverySubcommand) {
  ScratchDir dir;
  const RunResult top = RunPipeplan({"--help"}, dir.path());
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_TRUE(top.out.starts_with("usage: pipeplan <command>")) << top.out;
  EXPECT_EQ(top.err, "");
  for (const std::string command : {"plan", "simulate", "export", "import", "compare", "run",
                                    "diff", "profile", "calibrate", "demo"}) {
    SCOPED_TRACE(command);
    for (const std::string flag : {"--help", "-h"}) {
      const RunResult result = RunPipeplan({command, flag}, dir.path());
      EXPECT_EQ(result.exit_code, 0);
      EXPECT_TRUE(result.out.starts_with("usage: pipeplan " + command)) << result.out;
      EXPECT_NE(result.out.find("Example"), std::string::npos);
      EXPECT_EQ(result.err, "");
    }
    const RunResult via_help = RunPipeplan({"help", command}, dir.path());
    EXPECT_EQ(via_help.exit_code, 0);
    EXPECT_TRUE(via_help.out.starts_with("usage: pipeplan " + command));
  }
  // The strategy list in plan --help comes from the catalogue, auto last.
  const RunResult plan_help = RunPipeplan({"plan", "--help"}, dir.path());
  for (const Strategy& strategy : AllStrategies()) {
    EXPECT_FALSE(LineStartingWith(plan_help.out, {std::string(strategy.name)}).empty())
        << strategy.name;
  }
  EXPECT_FALSE(LineStartingWith(plan_help.out, {"auto", "any"}).empty()) << plan_help.out;
  for (const char* flag : {"--post-validation", "--overlap T", "--memory-limit"}) {
    EXPECT_NE(plan_help.out.find(flag), std::string::npos) << flag;
  }
  const RunResult compare_help = RunPipeplan({"compare", "--help"}, dir.path());
  for (const char* flag : {"--auto", "--post-validation", "--overlap T"}) {
    EXPECT_NE(compare_help.out.find(flag), std::string::npos) << flag;
  }
  EXPECT_EQ(plan_help.out.find("@STRATEGIES@"), std::string::npos);
  EXPECT_TRUE(dir.List().empty());
}

TEST(CliTest, PlanSimulateExportImportRoundTrip) {
  ScratchDir dir;
  const RunResult plan =
      RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "8", "--forward",
                   "1", "--backward", "2", "-o", "plan.pb"},
                  dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err, "");
  EXPECT_TRUE(dir.Exists("plan.pb"));

  const RunResult sim = RunPipeplan({"simulate", "plan.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.err, "");
  // (M + P - 1)(F + B) = 11 * 3.
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 33);
  EXPECT_GE(JsonNumber(sim.out, "zb_bubble_rate"), 0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "bubble_fraction_max"), 9.0 / 33.0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "bubble_fraction_mean"), 9.0 / 33.0);
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "lower_bound"), 24);
  EXPECT_EQ(JsonNumbers(sim.out, "busy"), std::vector<double>({24, 24, 24, 24}));
  const std::vector<double> peak = JsonNumbers(sim.out, "peak_activation_memory");
  ASSERT_EQ(peak.size(), 4u);
  EXPECT_DOUBLE_EQ(peak[0], 4);  // rank 0 of 1F1B holds P microbatches
  EXPECT_EQ(std::count(sim.out.begin(), sim.out.end(), '\n'), 1) << "one JSON object, one line";

  const RunResult csv =
      RunPipeplan({"export", "plan.pb", "--format", "torch-csv", "-o", "schedule.csv"}, dir.path());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string rows = dir.Read("schedule.csv");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 4) << rows;
  EXPECT_TRUE(rows.starts_with("0F0,")) << rows;

  const RunResult imported =
      RunPipeplan({"import", "--format", "torch-csv", "schedule.csv", "--microbatches", "8",
                   "--forward", "1", "--backward", "2", "-o", "imported.textproto"},
                  dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(dir.Read("imported.textproto").find("imported"), std::string::npos);

  const RunResult resim = RunPipeplan({"simulate", "imported.textproto", "--json"}, dir.path());
  ASSERT_EQ(resim.exit_code, 0) << resim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(resim.out, "makespan"), 33);
  EXPECT_EQ(JsonNumbers(resim.out, "busy"), JsonNumbers(sim.out, "busy"));
  EXPECT_NE(resim.out.find("\"strategy\":\"imported\""), std::string::npos) << resim.out;
}

TEST(CliTest, ImportWithoutCostFlagsUsesDefaultCosts) {
  ScratchDir dir;
  dir.Write("s.csv", "0F0,0B0\n");
  const RunResult imported = RunPipeplan(
      {"import", "--format", "torch-csv", "s.csv", "--strategy-name", "mine", "-o", "p.json"},
      dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_TRUE(dir.Read("p.json").starts_with("{"));
  const RunResult sim = RunPipeplan({"simulate", "p.json", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 3);  // F=1 + B=2
  EXPECT_NE(sim.out.find("\"strategy\":\"mine\""), std::string::npos) << sim.out;
}

TEST(CliTest, ImportTorchCsvCommsDropsTorchsTransfersWithANote) {
  ScratchDir dir;
  // What torch 2.11's runtime dumps by default (_dump_csv(), compute_comms) for 1F1B, P=2 M=2.
  dir.Write(
      "dump.csv",
      "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\r\n"
      "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\r\n");
  const RunResult imported =
      RunPipeplan({"import", "--format", "torch-csv-comms", "dump.csv", "-o", "p.pb"}, dir.path());
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.err.find("note: dropped torch's 8 transfers (SEND_F, RECV_F, SEND_B, "
                              "RECV_B) and 6 bookkeeping actions"),
            std::string::npos)
      << imported.err;
  const RunResult sim = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 9);  // (M + P - 1)(F + B)
  const RunResult plain =
      RunPipeplan({"import", "--format", "torch-csv", "dump.csv", "-o", "q.pb"}, dir.path());
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("rank 0, cell 0: '0UNSHARD' is not a compute action"), std::string::npos)
      << plain.err;
}

TEST(CliTest, PlanOutputFormatFollowsExtension) {
  ScratchDir dir;
  const std::vector<std::string> base = {"plan", "--strategy",     "gpipe", "--ranks",
                                         "2",    "--microbatches", "2"};
  for (const std::string name : {"p.pb", "p.json", "p.textproto", "p.txt"}) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"-o", name});
    const RunResult result = RunPipeplan(args, dir.path());
    ASSERT_EQ(result.exit_code, 0) << name << ": " << result.err;
    EXPECT_NE(result.out.find("to " + name), std::string::npos) << result.out;
  }
  EXPECT_TRUE(dir.Read("p.json").starts_with("{"));
  EXPECT_NE(dir.Read("p.textproto").find("programs {"), std::string::npos);
  EXPECT_EQ(dir.Read("p.txt"), dir.Read("p.textproto"));
  EXPECT_NE(dir.Read("p.pb"), dir.Read("p.textproto"));

  // Without -o: text format on stdout, identical to the file.
  const RunResult to_stdout = RunPipeplan(base, dir.path());
  ASSERT_EQ(to_stdout.exit_code, 0);
  EXPECT_EQ(to_stdout.out, dir.Read("p.textproto"));

  // Every encoding simulates the same.
  std::string first;
  for (const std::string name : {"p.pb", "p.json", "p.textproto"}) {
    const RunResult sim = RunPipeplan({"simulate", name, "--json"}, dir.path());
    ASSERT_EQ(sim.exit_code, 0) << name << ": " << sim.err;
    if (first.empty()) first = sim.out;
    EXPECT_EQ(sim.out, first) << name;
  }
}

TEST(CliTest, CostFlagsAndEqualsSyntax) {
  ScratchDir dir;
  // B defaults to I + W.
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy=1f1b", "--ranks=2", "--microbatches=3", "--forward=2",
       "--backward-input=1.5", "--backward-weight", "0.5", "--comm", "0.25", "-o", "p.json"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult sim = RunPipeplan({"simulate", "p.json", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  // Every rank runs 3 F (2) and 3 B (1.5 + 0.5).
  EXPECT_EQ(JsonNumbers(sim.out, "busy"), std::vector<double>({12, 12}));
  // Critical path of one microbatch: F, comm, F, B, comm, B = 2 + .25 + 2 + 2 + .25 + 2.
  EXPECT_GE(JsonNumber(sim.out, "makespan"), 12 + 4 + 0.5);
}

// 1F1B P=2 M=1, F=1, B=2, latency 0.5 (makespan 7) with a receive overhead of 3: the first
// stage-1 receive, posted at 0, ends at 3 instead of 1.5 (simulator_test works it out).
TEST(CliTest, ReceiveOverheadFlagReachesThePlanAndTheSimulation) {
  ScratchDir dir;
  const RunResult plan =
      RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "1", "--comm",
                   "0.5", "--receive-overhead", "3", "-o", "p.txtpb"},
                  dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(dir.Read("p.txtpb").find("receive_overhead: 3"), std::string::npos);
  const RunResult sim = RunPipeplan({"simulate", "p.txtpb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 8.5);
}

TEST(CliTest, SimulateWithOtherCostsKeepsTheActionsAndWritesThoseCosts) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan(
                {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "p.pb"},
                dir.path())
                .exit_code,
            0);
  // 1F1B with uniform costs and no comm: (M + P - 1) (F + B) = 3 * (2 + 4).
  dir.Write("costs.textproto",
            "stages { forward: 2 backward: 4 backward_input: 2 backward_weight: 2 }\n");
  const RunResult sim = RunPipeplan(
      {"simulate", "p.pb", "--costs", "costs.textproto", "--json", "--timeline", "s.json"},
      dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_DOUBLE_EQ(JsonNumber(sim.out, "makespan"), 18);
  EXPECT_NE(dir.Read("s.json").find("\"forward\": 2"), std::string::npos);
  const RunResult plain = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(plain.out, "makespan"), 9);  // the plan's own F=1, B=2

  dir.Write("bad.textproto", "stages { forward: -1 }\n");
  const RunResult bad = RunPipeplan({"simulate", "p.pb", "--costs", "bad.textproto"}, dir.path());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.textproto"), std::string::npos) << bad.err;
}

TEST(CliTest, SimulateTableAndReports) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zb-h1", "--ranks", "4", "--microbatches", "8", "-o",
                         "zb.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult sim = RunPipeplan({"simulate", "zb.pb", "--trace", "out/trace.json", "--svg",
                                     "out/t.svg", "--html", "out/report.html"},
                                    dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(sim.err, "");
  EXPECT_NE(sim.out.find("makespan"), std::string::npos) << sim.out;
  EXPECT_NE(sim.out.find("zb_bubble_rate"), std::string::npos);
  EXPECT_NE(sim.out.find("peak activation memory"), std::string::npos);
  EXPECT_NE(sim.out.find("wrote out/report.html"), std::string::npos);
  EXPECT_TRUE(dir.Read("out/trace.json").starts_with("{") ||
              dir.Read("out/trace.json").starts_with("["));
  EXPECT_NE(dir.Read("out/t.svg").find("<svg"), std::string::npos);
  EXPECT_NE(dir.Read("out/report.html").find("<html"), std::string::npos);
  // zb-h1 at P=4 M=8 with unit costs: 27 (reference/strategies.md).
  const RunResult json = RunPipeplan({"simulate", "zb.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(json.out, "makespan"), 27);
}

TEST(CliTest, ExportFormats) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan(
                {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "p.pb"},
                dir.path())
                .exit_code,
            0);
  const RunResult comms =
      RunPipeplan({"export", "p.pb", "--format", "torch-csv-comms"}, dir.path());
  ASSERT_EQ(comms.exit_code, 0) << comms.err;
  EXPECT_NE(comms.out.find("SEND_F"), std::string::npos) << comms.out;
  const RunResult text = RunPipeplan({"export", "p.pb", "--format", "textproto"}, dir.path());
  ASSERT_EQ(text.exit_code, 0);
  const RunResult plan_text = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2"}, dir.path());
  EXPECT_EQ(text.out, plan_text.out);
  const RunResult json = RunPipeplan({"export", "p.pb", "--format", "json"}, dir.path());
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_TRUE(json.out.starts_with("{"));
}

TEST(CliTest, CompareListsEveryStrategyAndMarksTheBest) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "4", "--html", "cmp/report.html"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2"}) {
    EXPECT_NE(result.out.find(name), std::string::npos) << name;
  }
  // zb-h2 needs M >= 2P: listed with the reason.
  const size_t zbh2 = result.out.find("zb-h2");
  ASSERT_NE(zbh2, std::string::npos);
  const std::string zbh2_line = result.out.substr(zbh2, result.out.find('\n', zbh2) - zbh2);
  EXPECT_NE(zbh2_line.find("failed: "), std::string::npos) << zbh2_line;
  EXPECT_NE(result.out.find("\n*"), std::string::npos) << result.out;
  // Catalogue order.
  EXPECT_LT(result.out.find("gpipe"), result.out.find("zb-h1"));
  EXPECT_TRUE(dir.Exists("cmp/report.html"));
}

TEST(CliTest, DemoWritesReport) {
  ScratchDir dir;
  const RunResult result = RunPipeplan({"demo"}, dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("report: pipeplan-report/index.html"), std::string::npos) << result.out;
  const std::string html = dir.Read("pipeplan-report/index.html");
  EXPECT_NE(html.find("<html"), std::string::npos);
  // Every strategy of the catalogue has a row, plans and gets a timeline in the report.
  for (const Strategy& strategy : AllStrategies()) {
    const std::string name(strategy.name);
    const std::vector<std::string> row = LineStartingWith(result.out, {name});
    const std::vector<std::string> best_row = LineStartingWith(result.out, {"*", name});
    EXPECT_TRUE(!row.empty() || !best_row.empty()) << name << "\n" << result.out;
    EXPECT_NE(html.find("<h2>" + name + "</h2>"), std::string::npos) << name;
  }
  // The paper's figures (zb_bubble_rate column).
  EXPECT_EQ(LineStartingWith(result.out, {"1f1b", "1"}).at(3), "0.2431");
  EXPECT_EQ(LineStartingWith(result.out, {"zb-h1", "1"}).at(3), "0.1585");
  EXPECT_EQ(LineStartingWith(result.out, {"zb-h2", "1"}).at(3), "0.1083");
  // auto's pick is printed and has its own timeline; every strategy planned.
  EXPECT_NE(result.out.find("\nauto picks "), std::string::npos) << result.out;
  EXPECT_NE(html.find("<h2>auto -&gt; "), std::string::npos);
  EXPECT_EQ(html.find("Could not plan"), std::string::npos);
  EXPECT_EQ(dir.List(),
            std::vector<std::string>({"pipeplan-report", "pipeplan-report/index.html"}));

  const RunResult elsewhere = RunPipeplan({"demo", "--output-dir", "a/b"}, dir.path());
  ASSERT_EQ(elsewhere.exit_code, 0) << elsewhere.err;
  EXPECT_TRUE(dir.Exists("a/b/index.html"));
  EXPECT_NE(elsewhere.out.find("report: a/b/index.html"), std::string::npos);
}

// ZB-V with post-validation: every rank gets a PV, and the (P-1)^2 = 9 receives whose sends
// precede the sender's PV are tagged rollback (DESIGN.md, vocabulary; post_validation.h).
TEST(CliTest, PostValidationShowsInSimulateReportsAndExportNotes) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches",
                                      "8", "--post-validation", "-o", "zbv.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_EQ(plan.err, "");

  const RunResult sim = RunPipeplan({"simulate", "zbv.pb", "--html", "r.html"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\npost-validation: PV on every rank, 9 receives tagged rollback\n"),
            std::string::npos)
      << sim.out;
  const std::string html = dir.Read("r.html");
  EXPECT_NE(html.find("post-validation: PV on every rank, 9 receives tagged rollback"),
            std::string::npos);
  EXPECT_NE(html.find("pp-PV"), std::string::npos) << "the timeline draws the PV actions";

  const RunResult json = RunPipeplan({"simulate", "zbv.pb", "--json"}, dir.path());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"post_validation\":true,\"rollback_receives\":9,"), std::string::npos)
      << json.out;

  // With P=8: (P-1)^2 = 49.
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "8", "--microbatches", "16",
                         "--post-validation", "-o", "zbv8.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult json8 = RunPipeplan({"simulate", "zbv8.pb", "--json"}, dir.path());
  EXPECT_DOUBLE_EQ(JsonNumber(json8.out, "rollback_receives"), 49) << json8.out;

  // Without --post-validation there is no such line, and the JSON says so.
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "zbv", "--ranks", "4", "--microbatches", "8", "-o",
                         "plain.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult plain = RunPipeplan({"simulate", "plain.pb"}, dir.path());
  EXPECT_EQ(plain.out.find("post-validation"), std::string::npos) << plain.out;
  const RunResult plain_json = RunPipeplan({"simulate", "plain.pb", "--json"}, dir.path());
  EXPECT_NE(plain_json.out.find("\"post_validation\":false,\"rollback_receives\":0,"),
            std::string::npos)
      << plain_json.out;

  // torch's CSV cannot hold PV or rollback flags: the export says so on stderr and succeeds.
  const RunResult csv = RunPipeplan({"export", "zbv.pb", "--format", "torch-csv"}, dir.path());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_NE(csv.err.find("note: post-validation actions left out"), std::string::npos) << csv.err;
  EXPECT_EQ(csv.out.find("PV"), std::string::npos);
  const RunResult comms =
      RunPipeplan({"export", "zbv.pb", "--format", "torch-csv-comms"}, dir.path());
  ASSERT_EQ(comms.exit_code, 0) << comms.err;
  EXPECT_NE(comms.err.find("note: rollback flags left out"), std::string::npos) << comms.err;
  const RunResult plain_csv =
      RunPipeplan({"export", "plain.pb", "--format", "torch-csv-comms"}, dir.path());
  EXPECT_EQ(plain_csv.err, "");
}

TEST(CliTest, CompareWithPostValidationKeepsToTheZeroBubbleFamily) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"compare", "--ranks", "4", "--microbatches", "8", "--post-validation", "--html", "pv.html"},
      dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("rollback RECVs"), std::string::npos) << result.out;
  EXPECT_TRUE(LineStartingWith(result.out, {"1f1b"}).empty()) << result.out;
  EXPECT_TRUE(LineStartingWith(result.out, {"dualpipe"}).empty()) << result.out;
  // zbv's row ends with its rollback receives.
  std::vector<std::string> zbv = LineStartingWith(result.out, {"*", "zbv"});
  if (zbv.empty()) zbv = LineStartingWith(result.out, {"zbv"});
  ASSERT_FALSE(zbv.empty()) << result.out;
  EXPECT_EQ(zbv.back(), "9");
  EXPECT_NE(dir.Read("pv.html").find("receives tagged rollback: zb-h1 9"), std::string::npos);
}

TEST(CliTest, OverlapCostDrivesTheOverlapStrategies) {
  ScratchDir dir;
  const std::vector<std::string> base = {
      "plan", "--strategy", "1f1b-overlap", "--ranks", "4", "--microbatches", "8"};
  // Without --overlap a cell costs F + B: the same as 1F1B, (M + P - 1)(F + B) = 33.
  EXPECT_DOUBLE_EQ(PlannedMakespan(base, dir), 33);
  std::vector<std::string> cheaper = base;
  cheaper.insert(cheaper.end(), {"--overlap", "2"});
  const double with_overlap = PlannedMakespan(cheaper, dir);
  EXPECT_LT(with_overlap, 33);
  EXPECT_DOUBLE_EQ(with_overlap, 26);
  std::vector<std::string> dearer = base;
  dearer.insert(dearer.end(), {"--overlap=4"});
  EXPECT_GT(PlannedMakespan(dearer, dir), 33);
  // Strategies without overlap cells ignore it.
  EXPECT_DOUBLE_EQ(PlannedMakespan({"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches",
                                    "8", "--overlap", "2"},
                                   dir),
                   33);

  // compare: one share's overlap cost, split over the V stages like F and B.
  const RunResult plain =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8"}, dir.path());
  const RunResult cheap =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8", "--overlap", "2"}, dir.path());
  ASSERT_EQ(cheap.exit_code, 0) << cheap.err;
  EXPECT_NE(cheap.out.find("overlap=2"), std::string::npos) << cheap.out;
  for (const std::string name : {"1f1b-overlap", "interleaved-1f1b-overlap", "dualpipe-v"}) {
    std::vector<std::string> before = LineStartingWith(plain.out, {name});
    std::vector<std::string> after = LineStartingWith(cheap.out, {name});
    if (after.empty()) after = LineStartingWith(cheap.out, {"*", name});
    ASSERT_GE(before.size(), 3u) << name << "\n" << plain.out;
    ASSERT_GE(after.size(), 3u) << name << "\n" << cheap.out;
    const size_t makespan_at = after[0] == "*" ? 3 : 2;
    EXPECT_LT(std::stod(after[makespan_at]), std::stod(before[2])) << name;
  }
  EXPECT_EQ(LineStartingWith(cheap.out, {"1f1b-overlap"}).at(2), "26");
}

TEST(CliTest, AutoStrategyNamesItsPick) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8", "-o", "auto.pb"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  // One stderr line naming the pick.
  ASSERT_TRUE(plan.err.starts_with("note: auto chose ")) << plan.err;
  EXPECT_EQ(std::count(plan.err.begin(), plan.err.end(), '\n'), 1) << plan.err;
  const std::string picked = plan.err.substr(17, plan.err.find(' ', 17) - 17);
  EXPECT_NE(FindStrategy(picked), nullptr) << picked;
  EXPECT_NE(plan.out.find("wrote auto -> " + picked + " plan"), std::string::npos) << plan.out;

  const RunResult sim = RunPipeplan({"simulate", "auto.pb", "--json"}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("\"strategy\":\"auto -> " + picked + "\""), std::string::npos) << sim.out;
  // No slower than the best single strategy of compare (25.5 at P=4 M=8, unit costs), and
  // the note gives the simulated makespan.
  const double makespan = JsonNumber(sim.out, "makespan");
  EXPECT_LE(makespan, 25.5);
  const size_t at = plan.err.find("makespan ");
  ASSERT_NE(at, std::string::npos) << plan.err;
  EXPECT_DOUBLE_EQ(std::strtod(plan.err.c_str() + at + 9, nullptr), makespan) << plan.err;

  // Within a memory limit, and with post-validation: still a zero-bubble pick that fits.
  const RunResult limited =
      RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8",
                   "--memory-limit", "3", "--post-validation", "-o", "limited.pb"},
                  dir.path());
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  ASSERT_TRUE(limited.err.starts_with("note: auto chose ")) << limited.err;
  const std::string limited_pick = limited.err.substr(17, limited.err.find(' ', 17) - 17);
  const RunResult limited_sim = RunPipeplan({"simulate", "limited.pb", "--json"}, dir.path());
  ASSERT_EQ(limited_sim.exit_code, 0) << limited_sim.err;
  for (const double peak : JsonNumbers(limited_sim.out, "peak_memory")) EXPECT_LE(peak, 3);
  EXPECT_GT(JsonNumber(limited_sim.out, "rollback_receives"), 0) << limited_sim.out;
  EXPECT_NE(limited_pick, "1f1b");
  EXPECT_NE(limited_pick, "dualpipe");
}

TEST(CliTest, AutoWithAnImpossibleMemoryLimitFails) {
  ScratchDir dir;
  const RunResult result =
      RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4", "--microbatches", "8",
                   "--memory-limit", "0.5", "-o", "auto.pb"},
                  dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(
      result.err.starts_with("pipeplan plan: error: auto: no strategy fits memory limit 0.5"))
      << result.err;
  // The library names the smallest limit that fits and who needs it.
  EXPECT_NE(result.err.find("; the smallest limit that fits is "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(", needed by "), std::string::npos) << result.err;
  EXPECT_EQ(result.out, "");
  EXPECT_TRUE(dir.List().empty());
}

TEST(CliTest, CompareAutoListsTheCandidates) {
  ScratchDir dir;
  const RunResult plain =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8"}, dir.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("auto picks"), std::string::npos) << "only with --auto";

  const RunResult result = RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8",
                                        "--memory-limit", "4", "--auto", "--html", "cmp.html"},
                                       dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The usual table comes first, unchanged.
  EXPECT_TRUE(result.out.starts_with("P=4 M=8;")) << result.out;
  EXPECT_LT(result.out.find("(* = smallest makespan)"), result.out.find("auto picks "));
  EXPECT_FALSE(LineStartingWith(result.out, {"gpipe"}).empty());

  // auto's pick is the same as plan --strategy auto's.
  const RunResult plan = RunPipeplan({"plan", "--strategy", "auto", "--ranks", "4",
                                      "--microbatches", "8", "--memory-limit", "4", "-o", "a.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const std::string picked = plan.err.substr(17, plan.err.find(' ', 17) - 17);
  EXPECT_NE(result.out.find("\nauto picks " + picked + " (V="), std::string::npos) << result.out;

  // Candidates fastest first: numbered rows with non-decreasing makespans, all within the limit.
  std::vector<double> makespans;
  for (int rank = 1;; ++rank) {
    const std::vector<std::string> row = LineStartingWith(result.out, {std::to_string(rank)});
    if (row.empty()) break;
    ASSERT_GE(row.size(), 5u);
    makespans.push_back(std::stod(row[row.size() - 2]));
    EXPECT_LE(std::stod(row.back()), 4) << "peak memory within the limit";
  }
  ASSERT_GE(makespans.size(), 10u) << result.out;
  EXPECT_TRUE(std::is_sorted(makespans.begin(), makespans.end()));
  // The failures follow with their reason: zb-h2 needs 2P - 1 = 7 activations.
  const std::vector<std::string> failed = LineStartingWith(result.out, {"-", "zb-h2", "1"});
  ASSERT_FALSE(failed.empty()) << result.out;
  EXPECT_NE(result.out.find("failed: zb-h2 needs 7 memory on rank 0, above the memory limit 4"),
            std::string::npos);
  // The report carries auto's plan too.
  EXPECT_NE(dir.Read("cmp.html").find("<h2>auto -&gt; " + picked + "</h2>"), std::string::npos);
}

// compare splits a share's costs over ChunksPerShare stages exactly as auto does: each
// strategy's row equals auto's candidate for the same strategy and V.
TEST(CliTest, CompareAndAutoAgree) {
  ScratchDir dir;
  const RunResult result =
      RunPipeplan({"compare", "--ranks", "4", "--microbatches", "8", "--forward", "2", "--backward",
                   "3", "--comm", "0.25", "--auto"},
                  dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string table = result.out.substr(0, result.out.find("auto picks"));
  const std::string candidates = result.out.substr(result.out.find("auto picks"));
  int checked = 0;
  for (const std::string name : {"1f1b", "zb-h1", "zbv", "v-half", "dualpipe", "dualpipe-v",
                                 "1f1b-overlap", "interleaved-zb"}) {
    std::vector<std::string> row = LineStartingWith(table, {name});
    if (row.empty()) row = LineStartingWith(table, {"*", name});
    ASSERT_FALSE(row.empty()) << name << "\n" << table;
    if (row[0] == "*") row.erase(row.begin());
    // Find auto's candidate with the same strategy and V.
    std::istringstream lines(candidates);
    bool found = false;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::vector<std::string> tokens;
      for (std::string word; words >> word;) tokens.push_back(word);
      if (tokens.size() == 5 && tokens[1] == name && tokens[2] == row[1]) {
        EXPECT_EQ(tokens[3], row[2]) << name << " V=" << row[1];
        found = true;
      }
    }
    EXPECT_TRUE(found) << name << "\n" << candidates;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(CliTest, FailedPlanLeavesNoFileAndKeepsTheOldOne) {
  ScratchDir dir;
  const std::vector<std::string> failing = {"plan",           "--strategy", "zb-h2", "--ranks", "4",
                                            "--microbatches", "4",          "-o",    "out.pb"};
  RunResult result = RunPipeplan(failing, dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(dir.List().empty()) << "no output and no temp file";

  dir.Write("out.pb", "previous contents");
  result = RunPipeplan(failing, dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(dir.Read("out.pb"), "previous contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>({"out.pb"}));

  // A successful run replaces it whole.
  result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "4", "--microbatches", "4", "-o", "out.pb"},
      dir.path());
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(dir.Read("out.pb"), "previous contents");
  EXPECT_EQ(dir.List(), std::vector<std::string>({"out.pb"}));
}

TEST(CliTest, WriteIntoMissingDirectoryFailsCleanly) {
  ScratchDir dir;
  const RunResult result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "nodir/p.pb"},
      dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, Input("plan", "cannot write 'nodir/p.pb': No such file or directory"));
  EXPECT_TRUE(dir.List().empty());
}

}  // namespace
}  // namespace pipeplan::cli_test
