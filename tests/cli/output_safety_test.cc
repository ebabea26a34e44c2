// End-to-end tests of output safety: every command writes its files atomically, so a failed
// or interrupted command leaves no half-written output and no temp file, and an output that
// existed before is untouched; a command with several outputs writes all of them or none.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"

namespace pipeplan::cli_test {
namespace {

constexpr char kPrevious[] = "previous contents";

// A command that fails (exit 1) after its outputs were named.
struct FailingCase {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> outputs;  // exist before the run, with kPrevious in them
};

void PrintTo(const FailingCase& c, std::ostream* os) { *os << c.name; }

std::vector<FailingCase> FailingCases() {
  return {
      {"ExportOfABrokenPlan",
       {"export", "broken.pb", "--format", "torch-csv", "-o", "out.csv"},
       {"out.csv"}},
      {"ImportOfABadCsv",
       {"import", "--format", "torch-csv", "bad.csv", "-o", "out.pb"},
       {"out.pb"}},
      {"CompareWithABrokenCostFile",
       {"compare", "--ranks", "2", "--microbatches", "4", "--costs", "broken.txtpb", "--html",
        "compare.html"},
       {"compare.html"}},
      {"DiffOfBrokenTimelines",
       {"diff", "broken.pb", "broken.pb", "--html", "diff.html"},
       {"diff.html"}},
      {"ProfileOfABrokenTimeline",
       {"profile", "broken.pb", "-o", "profile.txtpb"},
       {"profile.txtpb"}},
      {"CalibrateOfABrokenProfile",
       {"calibrate", "broken.txtpb", "-o", "costs.txtpb"},
       {"costs.txtpb"}},
      // The last output cannot be written (its directory would be under a file), so none is.
      {"SimulateWithOneUnwritableOutput",
       {"simulate", "good.pb", "--trace", "trace.json", "--svg", "plan.svg", "--timeline", "sim.pb",
        "--html", "blocker/report.html"},
       {"trace.json", "plan.svg", "sim.pb"}},
      {"RunWithOneUnwritableOutput",
       {"run", "good.pb", "--time-scale", "0.0001", "--steps", "1", "--warmup", "0", "--timeline",
        "measured.pb", "--html", "blocker/run.html"},
       {"measured.pb"}},
  };
}

class FailedCommandTest : public ::testing::TestWithParam<FailingCase> {};

TEST_P(FailedCommandTest, KeepsEveryOutputAsItWasAndLeavesNoTempFile) {
  const FailingCase& c = GetParam();
  ScratchDir dir;
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "-o", "good.pb"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  dir.Write("broken.pb", "not a protobuf message");
  dir.Write("broken.txtpb", "stages { forward: -1 }");
  dir.Write("bad.csv", "0F0,banana\n");
  dir.Write("blocker", "a file where a directory would have to be");
  for (const std::string& output : c.outputs) dir.Write(output, kPrevious);
  const std::vector<std::string> before = dir.List();

  const RunResult result = RunPipeplan(c.args, dir.path());
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find(": error: "), std::string::npos) << result.err;
  EXPECT_EQ(dir.List(), before) << result.err;
  for (const std::string& output : c.outputs) EXPECT_EQ(dir.Read(output), kPrevious) << output;
}

INSTANTIATE_TEST_SUITE_P(Commands, FailedCommandTest, ::testing::ValuesIn(FailingCases()),
                         [](const ::testing::TestParamInfo<FailingCase>& param) {
                           return param.param.name;
                         });

// A plan far larger than the file size limit the tests set (about 100 KB of text).
const std::vector<std::string> kLargePlan = {
    "plan", "--strategy", "1f1b", "--ranks", "8", "--microbatches", "64", "-o", "plan.txtpb"};
constexpr uint64_t kFileSizeLimit = 4096;

TEST(OutputSafetyTest, InterruptedWriteLeavesNoTempFileAndKeepsTheOldOutput) {
  ScratchDir dir;
  // SIGXFSZ ends the process in the middle of writing its temp file, as Ctrl-C or a kill would.
  RunResult result = RunPipeplan(kLargePlan, dir.path(), {.max_file_bytes = kFileSizeLimit});
  EXPECT_EQ(result.signal, SIGXFSZ) << result.err;
  EXPECT_TRUE(dir.List().empty());

  dir.Write("plan.txtpb", kPrevious);
  result = RunPipeplan(kLargePlan, dir.path(), {.max_file_bytes = kFileSizeLimit});
  EXPECT_EQ(result.signal, SIGXFSZ) << result.err;
  EXPECT_EQ(dir.List(), std::vector<std::string>{"plan.txtpb"});
  EXPECT_EQ(dir.Read("plan.txtpb"), kPrevious);
}

TEST(OutputSafetyTest, FailedWriteNamesTheFileAndLeavesNoTempFile) {
  ScratchDir dir;
  dir.Write("plan.txtpb", kPrevious);
  const RunResult result = RunPipeplan(
      kLargePlan, dir.path(), {.max_file_bytes = kFileSizeLimit, .ignore_file_size_signal = true});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "pipeplan plan: error: cannot write 'plan.txtpb': File too large\n");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"plan.txtpb"});
  EXPECT_EQ(dir.Read("plan.txtpb"), kPrevious);
}

// Renaming over a symlink would replace the link; the file it points to is replaced instead.
TEST(OutputSafetyTest, ThroughASymlinkTheLinkStaysAndItsFileIsReplaced) {
  ScratchDir dir;
  dir.Write("real.txtpb", kPrevious);
  std::filesystem::create_symlink("real.txtpb", dir.File("link.txtpb"));
  const RunResult result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "link.txtpb"},
      dir.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir.File("link.txtpb")));
  EXPECT_EQ(std::filesystem::read_symlink(dir.File("link.txtpb")), "real.txtpb");
  EXPECT_EQ(dir.Read("real.txtpb").rfind("request {", 0), 0u) << dir.Read("real.txtpb");
  EXPECT_EQ(dir.List(), (std::vector<std::string>{"link.txtpb", "real.txtpb"}));
}

// A device or named pipe cannot be replaced (renaming over -o /dev/null would put a regular
// file in its place): it is written in place.
TEST(OutputSafetyTest, NamedPipeIsWrittenInPlace) {
  ScratchDir dir;
  const std::string fifo = dir.File("plan.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Read-write, so that opening does not block and pipeplan's open for writing finds a reader;
  // the plan (about 1 KB) fits in the pipe's buffer.
  const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  const RunResult result = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o", "plan.fifo"},
      dir.path());
  std::string received(1 << 16, '\0');
  const ssize_t got = ::read(fd, received.data(), received.size());
  ::close(fd);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_GT(got, 0);
  received.resize(static_cast<size_t>(got));
  EXPECT_EQ(received.rfind("request {", 0), 0u) << received;
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_EQ(dir.List(), std::vector<std::string>{"plan.fifo"});
}

// A reader that stops early (`| head`) with SIGPIPE ignored, as a Python harness leaves it:
// the write fails with EPIPE, which is the reader's choice, not an error of ours.
TEST(OutputSafetyTest, AReaderThatStopsEarlyIsNotAnError) {
  const ScratchDir dir;
  // More than a pipe holds (64 KiB), so the writer is still writing when head has gone.
  const std::string command =
      "cd '" + dir.path() + "' && trap '' PIPE && '" + std::string(PIPEPLAN_CLI_PATH) +
      "' plan --strategy 1f1b --ranks 8 --microbatches 256 -o - "
      "2>err.txt | head -c 100 >/dev/null; echo \\${PIPESTATUS[0]} >status.txt";
  const std::string shell = "bash -c \"" + command + "\"";
  ASSERT_EQ(std::system(shell.c_str()), 0) << shell;
  EXPECT_EQ(dir.Read("status.txt"), "0\n");
  EXPECT_EQ(dir.Read("err.txt"), "");
}

TEST(OutputSafetyTest, OneFileForTwoOutputsIsAnError) {
  ScratchDir dir;
  ASSERT_EQ(RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "2", "-o",
                         "plan.pb"},
                        dir.path())
                .exit_code,
            0);
  const RunResult result =
      RunPipeplan({"simulate", "plan.pb", "--svg", "out.html", "--html", "./out.html"}, dir.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "pipeplan simulate: error: './out.html' is given for two outputs\n");
  EXPECT_EQ(dir.List(), std::vector<std::string>{"plan.pb"});
}

}  // namespace
}  // namespace pipeplan::cli_test
