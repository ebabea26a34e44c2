// End-to-end reproductions of what a reviewer broke by hand (issue 50): each ends with a
// correct result or a message naming the input, nothing left in $TMPDIR, no process left
// running and no output changed.
#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.h"
#include "gtest/gtest.h"

namespace pipeplan::cli_test {
namespace {

bool AllPrintable(const std::string& text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && c != '\n' && c != '\t') return false;
    if (byte == 0x7f) return false;
  }
  return true;
}

// p.pb: 1f1b, P = 2, M = 4, written by the command.
void WriteSmallPlan(const ScratchDir& dir) {
  const RunResult plan = RunPipeplan(
      {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "-o", "p.pb"},
      dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
}

// A number too large for fixed notation once printed whole buffers of stack bytes.
TEST(Hardening, HugeFiguresPrintAsNumbers) {
  ScratchDir dir;
  const RunResult plan = RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "2",
                                      "--microbatches", "2", "--forward", "1e70", "-o", "b.pb"},
                                     dir.path());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult simulate = RunPipeplan({"simulate", "b.pb", "--svg", "b.svg"}, dir.path());
  ASSERT_EQ(simulate.exit_code, 0) << simulate.err;
  EXPECT_TRUE(AllPrintable(simulate.out)) << simulate.out;
  EXPECT_NE(simulate.out.find("3.0000000000000004e+70"), std::string::npos) << simulate.out;
  const std::string svg = dir.Read("b.svg");
  EXPECT_TRUE(AllPrintable(svg));
  EXPECT_TRUE(svg.ends_with("</svg>\n"))
      << svg.substr(svg.size() - std::min<size_t>(80, svg.size()));
  const RunResult limited = RunPipeplan({"plan", "--strategy", "1f1b", "--ranks", "2",
                                         "--microbatches", "2", "--memory-limit", "1e80GiB"},
                                        dir.path());
  EXPECT_EQ(limited.exit_code, 1);
  EXPECT_TRUE(AllPrintable(limited.err)) << limited.err;
  EXPECT_NE(limited.err.find("9.5367431640625e+73 PiB"), std::string::npos) << limited.err;
}

// Output that cannot be written is an error, whichever command printed it.
TEST(Hardening, AFullStandardOutputIsAnError) {
  ScratchDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteSmallPlan(dir));
  ASSERT_EQ(RunPipeplan({"simulate", "p.pb", "--timeline", "s.pb"}, dir.path()).exit_code, 0);
  const std::vector<std::vector<std::string>> commands = {
      {"simulate", "p.pb", "--json"},
      {"simulate", "p.pb"},
      {"compare", "--ranks", "2", "--microbatches", "4"},
      {"diff", "s.pb", "s.pb"},
      {"export", "p.pb", "--format", "torch-csv"},
      {"plan", "--help"},
  };
  for (const std::vector<std::string>& args : commands) {
    SCOPED_TRACE(args.front() + " " + args[1]);
    const RunResult run = RunPipeplan(args, dir.path(), {.stdout_path = "/dev/full"});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("error: cannot write to standard output"), std::string::npos) << run.err;
  }
}

// `simulate p.pb --svg p.pb` would destroy its own input, also through another path to it.
TEST(Hardening, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
  ScratchDir dir;
  ASSERT_NO_FATAL_FAILURE(WriteSmallPlan(dir));
  const std::string before = dir.Read("p.pb");
  std::filesystem::create_symlink("p.pb", dir.File("link.pb"));
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"simulate", "p.pb", "--svg", "p.pb"},
           {"simulate", "link.pb", "--timeline", "p.pb"},
           {"export", "p.pb", "--format", "json", "-o", "./p.pb"}}) {
    const RunResult run = RunPipeplan(args, dir.path());
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("it is an input of this command"), std::string::npos) << run.err;
    EXPECT_EQ(dir.Read("p.pb"), before);
  }
}

// A replaced output keeps its permissions (a private 0600 file stays private).
TEST(Hardening, AReplacedOutputKeepsItsMode) {
  ScratchDir dir;
  dir.Write("p.pb", "old");
  ASSERT_EQ(::chmod(dir.File("p.pb").c_str(), 0600), 0);
  ASSERT_NO_FATAL_FAILURE(WriteSmallPlan(dir));
  struct stat info = {};
  ASSERT_EQ(::stat(dir.File("p.pb").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_NE(dir.Read("p.pb"), "old");
}

// `bytes` bytes of JSON whitespace inside a trace, gzip'd: a few kilobytes per megabyte.
std::string GzipBomb(size_t bytes) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out;
  const std::string spaces(1 << 20, ' ');
  char buffer[1 << 16];
  const auto feed = [&](const std::string& piece, int flush) {
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    stream.avail_in = static_cast<uInt>(piece.size());
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof(buffer);
      deflate(&stream, flush);
      out.append(buffer, sizeof(buffer) - stream.avail_out);
    } while (stream.avail_out == 0);
  };
  feed("{\"traceEvents\": [", Z_NO_FLUSH);
  for (size_t sent = 0; sent < bytes; sent += spaces.size()) feed(spaces, Z_NO_FLUSH);
  feed("]}", Z_FINISH);
  deflateEnd(&stream);
  return out;
}

TEST(Hardening, ATraceThatInflatesPastTheLimitIsRefusedBeforeItTakesMemory) {
  ScratchDir dir;
  dir.Write("bomb.json.gz", GzipBomb(64u << 20));
  const RunResult run = RunPipeplan({"import", "--format", "torch-trace", "bomb.json.gz",
                                     "--max-trace-size", "16MiB", "-o", "m.pb"},
                                    dir.path());
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(run.err, Input("import",
                           "'bomb.json.gz' inflates to more than 16.0 MiB of JSON (a trace's "
                           "limit; --max-trace-size raises it)"));
  EXPECT_FALSE(dir.Exists("m.pb"));
  // Under the limit it is read, and found to hold no events.
  const RunResult raised = RunPipeplan({"import", "--format", "torch-trace", "bomb.json.gz",
                                        "--max-trace-size", "128MiB", "-o", "m.pb"},
                                       dir.path());
  EXPECT_EQ(raised.exit_code, 1);
  EXPECT_NE(raised.err.find("no 'PP:' action ranges"), std::string::npos) << raised.err;
  const RunResult unitless = RunPipeplan(
      {"import", "--format", "torch-trace", "bomb.json.gz", "--max-trace-size", "100"}, dir.path());
  EXPECT_EQ(unitless.exit_code, 2);
  EXPECT_NE(unitless.err.find("--max-trace-size: expected a size with a byte unit"),
            std::string::npos)
      << unitless.err;
}

// A stand-in for the solver, run by /bin/sh: `script` is its body ($2 is the result file).
struct FakeSolver {
  ScratchDir dir;
  ScratchDir temp;  // the TMPDIR the command runs with
  explicit FakeSolver(const std::string& script) { dir.Write("solver.sh", script); }
  ChildLimits Environment() const {
    return {.environment = {{"PIPEPLAN_SOLVER_PYTHON", "/bin/sh"},
                            {"PIPEPLAN_SOLVER_SCRIPT", dir.File("solver.sh")},
                            {"TMPDIR", temp.path()}}};
  }
};

TEST(Hardening, AMissingTmpdirIsNamed) {
  FakeSolver solver("echo 'status unknown' > \"$2\"\n");
  ScratchDir dir;
  ChildLimits environment = solver.Environment();
  environment.environment.back().second = dir.File("nonexistent");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "4", "-o", "x.pb"},
           {"plan", "--strategy", "auto", "--optimal", "--ranks", "2", "--microbatches", "4", "-o",
            "x.pb"}}) {
    const RunResult run = RunPipeplan(args, dir.path(), environment);
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("no directory for the solver's files: TMPDIR=" +
                           dir.File("nonexistent") + " is No such file or directory"),
              std::string::npos)
        << run.err;
    EXPECT_FALSE(dir.Exists("x.pb"));
  }
  const RunResult compare = RunPipeplan(
      {"compare", "--optimal", "--ranks", "2", "--microbatches", "4"}, dir.path(), environment);
  EXPECT_EQ(compare.exit_code, 0) << compare.err;
  EXPECT_NE(compare.out.find("failed: no directory for the solver's files"), std::string::npos)
      << compare.out;
}

// A time limit whose deadline does not fit the clock's range is still a deadline.
TEST(Hardening, AHugeTimeLimitWaitsForTheSolver) {
  FakeSolver solver("sleep 0.3; echo 'status unknown' > \"$2\"\n");
  ScratchDir dir;
  const RunResult run = RunPipeplan({"plan", "--strategy", "optimal", "--ranks", "2",
                                     "--microbatches", "4", "--time-limit", "1e10", "-o", "x.pb"},
                                    dir.path(), solver.Environment());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("did not stop within"), std::string::npos) << run.err;
  // The solver answered "unknown": the best heuristic's plan is written, and said so.
  EXPECT_NE(run.err.find("the solver found none faster"), std::string::npos) << run.err;
  EXPECT_TRUE(dir.Exists("x.pb"));
  EXPECT_TRUE(solver.temp.List().empty());
}

// Interrupted mid-solve: the solver is killed and its directory removed before the signal
// ends pipeplan; the solver never writes its result (its pid file says which process it was).
TEST(Hardening, AnInterruptedSolveLeavesNothing) {
  for (const int signal_number : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(signal_number);
    ScratchDir marks;
    FakeSolver solver("echo $$ > " + marks.File("pid") + "; sleep 2; echo late > " +
                      marks.File("late") + "; echo 'status unknown' > \"$2\"\n");
    ScratchDir dir;
    ChildLimits environment = solver.Environment();
    environment.while_running = [&](pid_t pid) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!marks.Exists("pid") && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the pid is written
      ::kill(pid, signal_number);
    };
    const RunResult run = RunPipeplan(
        {"plan", "--strategy", "optimal", "--ranks", "2", "--microbatches", "4", "-o", "x.pb"},
        dir.path(), environment);
    EXPECT_EQ(run.signal, signal_number) << run.err;
    EXPECT_TRUE(solver.temp.List().empty()) << solver.temp.List().front();
    ASSERT_TRUE(marks.Exists("pid"));
    const pid_t solver_pid = std::stoi(marks.Read("pid"));
    errno = 0;
    EXPECT_EQ(::kill(solver_pid, 0), -1) << "the solver (pid " << solver_pid << ") still runs";
    EXPECT_EQ(errno, ESRCH);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_FALSE(marks.Exists("late"));
    EXPECT_FALSE(dir.Exists("x.pb"));
  }
}

}  // namespace
}  // namespace pipeplan::cli_test
