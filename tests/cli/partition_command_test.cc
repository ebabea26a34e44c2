// pipeplan partition end to end: the split a hand-checkable model must get, the files it
// writes for the runtimes and their agreement with 'simulate', and bad input leaving nothing.
#include <algorithm>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"

namespace pipeplan::cli_test {
namespace {

// An embedding, two blocks and a head as heavy as three of them: under 1f1b at P = 2 the
// stages balance only with the head alone on the last (3 + 3 of forward), not with the even
// split's two layers each (2 + 4).
constexpr char kLayers[] = R"({"layers": [
  {"name": "tok_embeddings", "forward": 1, "backward": 2, "activation": 100,
   "parameter_bytes": 1000, "output_bytes": 10},
  {"name": "layers.0", "forward": 1, "backward": 2, "activation": 100, "parameter_bytes": 1000,
   "output_bytes": 10},
  {"name": "layers.1", "forward": 1, "backward": 2, "activation": 100, "parameter_bytes": 1000,
   "output_bytes": 10},
  {"name": "output", "forward": 3, "backward": 6, "activation": 300, "parameter_bytes": 3000}],
  "time_unit": "ms"})";

TEST(PartitionCommand, PutsTheHeavyHeadAloneAndSaysWhatTheEvenSplitCosts) {
  const ScratchDir dir;
  dir.Write("layers.json", kLayers);
  const RunResult run =
      RunPipeplan({"partition", "--layers", "layers.json", "--ranks", "2", "--microbatches", "4",
                   "--strategy", "1f1b", "--json", "-o", "plan.pb", "--split", "split.json"},
                  dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind(R"({"strategy":"1f1b","stages_per_rank":1,)"
                          R"("stages":[["tok_embeddings","layers.0","layers.1"],["output"]],)",
                          0),
            0u)
      << run.out;
  // 1f1b, P = 2, M = 4, stages of F 3 and B 6 each: (M + P - 1) (F + B) = 45.
  EXPECT_EQ(JsonNumber(run.out, "makespan"), 45);
  // The even split: stages of F 2 and 4: the last stage paces the step, 4 x 12 + 2 + 4 = 54.
  EXPECT_EQ(JsonNumber(run.out, "same_strategy_makespan"), 54);
  EXPECT_EQ(JsonNumbers(run.out, "peak_memory").size(), 2u);
  // The plan written is the plan printed.
  const RunResult simulated = RunPipeplan({"simulate", "plan.pb", "--json"}, dir.path());
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(JsonNumber(simulated.out, "makespan"), 45);
  EXPECT_EQ(dir.Read("split.json"),
            R"({"module_fqns_per_model_part":[["tok_embeddings","layers.0","layers.1"],)"
            R"(["output"]],"pipeline_model_parallel_layout":"Et*2|L"})"
            "\n");
}

TEST(PartitionCommand, PrintsEachStagesLayersAndTheRanksPeaks) {
  const ScratchDir dir;
  dir.Write("layers.json", kLayers);
  const RunResult run = RunPipeplan({"partition", "--layers", "layers.json", "--ranks", "2",
                                     "--microbatches", "4", "--strategy", "1f1b"},
                                    dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Stage 0's activation: its layers' 300 B and its output (10 B), held from F to B.
  EXPECT_EQ(LineStartingWith(run.out, {"0"}),
            (std::vector<std::string>{"0", "tok_embeddings", "..", "layers.1", "(3)", "3", "6", "3",
                                      "3", "310", "B", "2.93", "KiB"}));
  EXPECT_NE(run.out.find("the even split (torchtitan's default), with the same strategy: 1f1b "
                         "(V=1): step 54 ms (20.0% longer than this split's)"),
            std::string::npos)
      << run.out;
  // 1f1b reads F and B, both given: nothing to note.
  EXPECT_EQ(run.err, "");
}

// Only B is given: every zero-bubble and F&B schedule rests on I + W = B. auto picks the
// fastest that does not (1f1b's 45 ms here), names the faster one it passed over, and weighs
// the even split the same way.
TEST(PartitionCommand, AutoPicksOnGivenFiguresAndSaysWhatItPassedOver) {
  const ScratchDir dir;
  dir.Write("layers.json", kLayers);
  const RunResult run = RunPipeplan(
      {"partition", "--layers", "layers.json", "--ranks", "2", "--microbatches", "4", "--json"},
      dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(JsonNumber(run.out, "makespan"), 45) << run.out;
  EXPECT_NE(run.err.find("faster only if I + W = B (the layer costs do not give it), so it is "
                         "not picked; give each layer's backward_input and backward_weight"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.out.find(R"("even":{"strategy":")"), std::string::npos);
  EXPECT_GE(JsonNumber(run.out, "same_strategy_makespan"), 45);
}

// A limit per rank: "no rank above what the even split holds". Under 1f1b rank 0 holds two
// microbatches' activations, so the split with the head alone (rank 0: three layers' static
// bytes, two of their activations and outputs) is above rank 0's limit; the even split is the
// only one within both. One limit of the larger amount for every rank keeps the faster split.
TEST(PartitionCommand, KeepsEachRankWithinItsOwnLimit) {
  const ScratchDir dir;
  dir.Write("layers.json", kLayers);
  const std::vector<std::string> args = {"partition", "--layers",   "layers.json",
                                         "--ranks",   "2",          "--microbatches",
                                         "4",         "--strategy", "1f1b"};
  std::vector<std::string> per_rank = args;
  per_rank.insert(per_rank.end(), {"--memory-limit", "2500,5000"});
  const RunResult limited = RunPipeplan(per_rank, dir.path());
  ASSERT_EQ(limited.exit_code, 0) << limited.err;
  EXPECT_NE(limited.out.find("step 54 ms"), std::string::npos) << limited.out;
  EXPECT_EQ(LineStartingWith(limited.out, {"rank"}),
            (std::vector<std::string>{"rank", "peak", "memory", "limit", "busy"}));
  // Each rank's row: its peak, then its own limit (2500 B, 5000 B). Rank 0: 2000 B static,
  // two microbatches of 200 B activation and 10 B of output.
  EXPECT_NE(limited.out.find("2.36 KiB  2.44 KiB"), std::string::npos) << limited.out;
  EXPECT_NE(limited.out.find("4.30 KiB  4.88 KiB"), std::string::npos) << limited.out;

  std::vector<std::string> one = args;
  one.insert(one.end(), {"--memory-limit", "5000", "--json"});
  const RunResult loose = RunPipeplan(one, dir.path());
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  EXPECT_EQ(JsonNumber(loose.out, "makespan"), 45);
}

TEST(PartitionCommand, ALimitOfOneRankThatIsNotAnAmountIsAUsageError) {
  const ScratchDir dir;
  dir.Write("layers.json", kLayers);
  const RunResult run = RunPipeplan({"partition", "--layers", "layers.json", "--ranks", "2",
                                     "--microbatches", "4", "--memory-limit", "2GiB, x"},
                                    dir.path());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, Usage("partition",
                           "--memory-limit (rank 1): expected a number, optionally "
                           "with a unit (70GiB, 512MiB), got 'x'"));
}

struct BadCase {
  std::string name;
  std::string layers;
  std::vector<std::string> flags;
  int exit_code;
  std::string error;
};

TEST(PartitionCommand, BadInputFailsNamingItAndWritesNothing) {
  const std::vector<BadCase> cases = {
      {"no layers",
       R"({"layers": []})",
       {},
       1,
       "layers.json: layer costs file: layers: none given"},
      {"negative",
       R"({"layers": [{"name": "a", "forward": -1, "backward": 1}]})",
       {},
       1,
       "layers.json: layer costs file: layers[0] (a).forward: must be a finite number >= 0, "
       "got -1"},
      {"not finite",
       R"({"layers": [{"name": "a", "forward": "Infinity", "backward": 1}]})",
       {},
       1,
       "layers.json: layer costs file: layers[0] (a).forward: must be a finite number >= 0, "
       "got inf"},
      {"fewer layers than stages",
       kLayers,
       {"--ranks", "8", "--strategy", "1f1b"},
       1,
       "4 layers cannot fill the 8 stages of 1f1b at P=8, V=1 (each stage needs a layer)"},
      // auto: of all it left out, the candidate closest to fitting is named.
      {"one layer, auto",
       R"({"layers": [{"name": "a", "forward": 1, "backward": 1}]})",
       {},
       1,
       "1 layer cannot fill the 2 stages of gpipe at P=2, V=1 (each stage needs a layer)"},
      {"limit without memory",
       R"({"layers": [{"name": "a", "forward": 1, "backward": 1},
                      {"name": "b", "forward": 1, "backward": 1}]})",
       {"--memory-limit", "1GiB"},
       1,
       "a memory limit needs the layers' memory (activation, parameter_bytes, output_bytes in "
       "the layer costs file): none is given"},
      {"nothing fits",
       kLayers,
       {"--strategy", "1f1b", "--memory-limit", "100B"},
       1,
       "no split fits memory limit 100 B (100 B); the smallest peak found is"},
      {"unknown strategy", kLayers, {"--strategy", "2f2b"}, 1, "unknown strategy '2f2b'"},
      {"limits neither one nor one per rank",
       kLayers,
       {"--memory-limit", "1GiB,1GiB,1GiB"},
       1,
       "memory limits: give one for every rank or one per rank (2), got 3"},
      {"nothing fits the limits per rank",
       kLayers,
       {"--strategy", "1f1b", "--memory-limit", "1GiB,100B"},
       1,
       "no split fits the memory limits per rank (1.00 GiB (1073741824 B), 100 B (100 B)); the "
       "nearest, 1f1b (V=1): rank 1 holds "},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const ScratchDir dir;
    dir.Write("layers.json", c.layers);
    std::vector<std::string> args = {"partition", "--layers",       "layers.json", "--ranks",
                                     "2",         "--microbatches", "4",           "-o",
                                     "plan.pb",   "--split",        "split.json"};
    for (size_t i = 0; i < c.flags.size(); i += 2) {
      // A later flag of the same name wins over the defaults above.
      const auto given = std::find(args.begin(), args.end(), c.flags[i]);
      if (given != args.end()) {
        *(given + 1) = c.flags[i + 1];
      } else {
        args.push_back(c.flags[i]);
        args.push_back(c.flags[i + 1]);
      }
    }
    const RunResult run = RunPipeplan(args, dir.path());
    EXPECT_EQ(run.exit_code, c.exit_code) << run.err;
    EXPECT_EQ(run.err.rfind("pipeplan partition: error: " + c.error, 0), 0u) << run.err;
    EXPECT_EQ(dir.List(), std::vector<std::string>{"layers.json"});
  }
  const ScratchDir dir;
  const RunResult missing = RunPipeplan({"partition", "--ranks", "2"}, dir.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, Usage("partition", "missing --layers FILE (see --help)"));
}

}  // namespace
}  // namespace pipeplan::cli_test
