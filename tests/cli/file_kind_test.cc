// Every reader of the pipeplan command against every kind of file the project writes, a torch
// CSV, an empty file and random bytes: the wrong file exits 1 with a message that names the
// file, what it is and what the command expects (issue: files that say what they are).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace pipeplan::cli_test {
namespace {

// The files, made by the tool itself in one scratch directory shared by the suite.
class FileKindMatrix : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    const std::vector<std::vector<std::string>> steps = {
        {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "-o", "plan.pb"},
        {"simulate", "plan.pb", "--timeline", "timeline.pb"},
        {"profile", "timeline.pb", "--time-scale", "0.001", "-o", "profile.pb"},
        {"calibrate", "profile.pb", "-o", "costs.pb"},
        {"export", "plan.pb", "--format", "torch-csv", "-o", "schedule.csv"},
    };
    for (const std::vector<std::string>& args : steps) {
      const RunResult result = RunPipeplan(args, dir_->path());
      ASSERT_EQ(result.exit_code, 0) << args[0] << ": " << result.err;
    }
    dir_->Write("request.json",
                R"({"kind": "PLAN_REQUEST", "strategy": "1f1b", "topology": {"ranks": 2,)"
                R"( "microbatches": 4}})");
    dir_->Write("empty.pb", "");
    std::string noise;
    for (int i = 0; i < 256; ++i) noise.push_back(static_cast<char>((i * 167 + 13) % 256));
    dir_->Write("noise.pb", noise);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static ScratchDir* dir_;
};

ScratchDir* FileKindMatrix::dir_ = nullptr;

struct Reader {
  std::string name;               // the command, as the error prefix names it
  std::string expects;            // the kind it reads, as messages name it
  std::vector<std::string> args;  // "@" stands for the file
};

std::vector<std::string> WithFile(const std::vector<std::string>& args, const std::string& file) {
  std::vector<std::string> out;
  for (const std::string& arg : args) out.push_back(arg == "@" ? file : arg);
  return out;
}

const std::vector<Reader>& Readers() {
  static const std::vector<Reader> readers = {
      {"simulate", "plan", {"simulate", "@"}},
      {"export", "plan", {"export", "@", "--format", "json"}},
      {"run", "plan", {"run", "@", "--time-scale", "0.0001"}},
      {"diff", "timeline", {"diff", "timeline.pb", "@"}},
      {"profile", "timeline", {"profile", "@", "--time-scale", "0.001"}},
      {"calibrate", "profile", {"calibrate", "@"}},
      {"plan", "request", {"plan", "--request", "@"}},
      {"plan",
       "cost model",
       {"plan", "--strategy", "1f1b", "--ranks", "2", "--microbatches", "4", "--costs", "@"}},
  };
  return readers;
}

// Each file and the kind it holds, as messages name it.
const std::map<std::string, std::string>& Files() {
  static const std::map<std::string, std::string> files = {
      {"plan.pb", "plan"},        {"timeline.pb", "timeline"}, {"profile.pb", "profile"},
      {"costs.pb", "cost model"}, {"request.json", "request"},
  };
  return files;
}

TEST_F(FileKindMatrix, EveryReaderRefusesEveryOtherKindNamingBoth) {
  for (const Reader& reader : Readers()) {
    for (const auto& [file, kind] : Files()) {
      if (kind == reader.expects) continue;
      SCOPED_TRACE(reader.name + " given " + file);
      const RunResult result = RunPipeplan(WithFile(reader.args, file), dir_->path());
      EXPECT_EQ(result.exit_code, 1) << result.err;
      EXPECT_EQ(
          result.err.rfind("pipeplan " + reader.name + ": error: " + file + " is a " + kind +
                               " file; a " + reader.expects + " file is expected here: write one ",
                           0),
          0u)
          << result.err;
    }
  }
}

TEST_F(FileKindMatrix, ATorchCsvPointsToImport) {
  for (const Reader& reader : Readers()) {
    SCOPED_TRACE(reader.name);
    const RunResult result = RunPipeplan(WithFile(reader.args, "schedule.csv"), dir_->path());
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.err, "pipeplan " + reader.name + ": error: schedule.csv is a torch " +
                              "pipelining CSV, not a " + reader.expects +
                              " file: make a plan of it with 'pipeplan import --format " +
                              "torch-csv schedule.csv -o plan.pb' (--format torch-csv-comms " +
                              "for torch's _dump_csv files)\n");
  }
}

TEST_F(FileKindMatrix, AnEmptyFileSaysSo) {
  for (const Reader& reader : Readers()) {
    SCOPED_TRACE(reader.name);
    const RunResult result = RunPipeplan(WithFile(reader.args, "empty.pb"), dir_->path());
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.err.rfind("pipeplan " + reader.name + ": error: empty.pb is empty; a " +
                                   reader.expects + " file is expected here: write one ",
                               0),
              0u)
        << result.err;
  }
}

TEST_F(FileKindMatrix, RandomBytesAreNotAPipeplanFile) {
  for (const Reader& reader : Readers()) {
    SCOPED_TRACE(reader.name);
    const RunResult result = RunPipeplan(WithFile(reader.args, "noise.pb"), dir_->path());
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_NE(result.err.find("noise.pb"), std::string::npos) << result.err;
    const bool not_valid =
        result.err.find(": not a valid binary pipeplan.v1.") != std::string::npos;
    const bool no_kind = result.err.find("records no file kind, so it is not a " + reader.expects +
                                         " file") != std::string::npos;
    EXPECT_TRUE(not_valid || no_kind) << result.err;
  }
}

TEST_F(FileKindMatrix, ImportRefusesAPipeplanFileByItsKind) {
  for (const auto& [file, kind] : Files()) {
    SCOPED_TRACE(file);
    const RunResult result = RunPipeplan({"import", "--format", "torch-csv", file}, dir_->path());
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_EQ(result.err, "pipeplan import: error: " + file + " is a " + kind +
                              " file, not a torch pipelining CSV (import reads the CSV that "
                              "torch's runtime loads or dumps)\n");
  }
}

TEST_F(FileKindMatrix, EachReaderReadsItsOwnKind) {
  for (const Reader& reader : Readers()) {
    for (const auto& [file, kind] : Files()) {
      if (kind != reader.expects) continue;
      SCOPED_TRACE(reader.name + " given " + file);
      const RunResult result = RunPipeplan(WithFile(reader.args, file), dir_->path());
      EXPECT_EQ(result.exit_code, 0) << result.err;
    }
  }
}

}  // namespace
}  // namespace pipeplan::cli_test
