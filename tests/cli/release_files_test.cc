// Files written by earlier builds, committed under tests/data/release-* by
// tests/data/make_release_files.sh (which names each commit), read back by this build: plans
// simulate to the figures the old build printed, requests plan the same order, old timelines diff
// and profile, old profiles calibrate, old cost files simulate to the old figures. Binary files
// from before files recorded their kind are refused with the way out.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace pipeplan::cli_test {
namespace {

struct Release {
  std::string dir;        // under tests/data
  std::string extension;  // of the plan, timelines and profile it wrote
  std::string name;       // of the test case
};

std::string ReleaseName(const ::testing::TestParamInfo<Release>& param) { return param.param.name; }

std::string DataDir(const Release& release) {
  return std::string(PIPEPLAN_TEST_DATA_DIR) + "/" + release.dir;
}

std::string ReadData(const Release& release, const std::string& name) {
  const std::string path = DataDir(release) + "/" + name;
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
}

class ReleaseFiles : public ::testing::TestWithParam<Release> {
 protected:
  std::string File(const std::string& stem) const {
    return DataDir(GetParam()) + "/" + stem + GetParam().extension;
  }
  std::string Data(const std::string& name) const { return DataDir(GetParam()) + "/" + name; }
  RunResult Run(const std::vector<std::string>& args) const {
    return RunPipeplan(args, scratch_.path());
  }
  ScratchDir scratch_;
};

TEST_P(ReleaseFiles, APlanSimulatesToTheFiguresTheOldBuildPrinted) {
  const RunResult result = Run({"simulate", File("plan"), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string old = ReadData(GetParam(), "simulate.json");
  EXPECT_EQ(JsonNumber(result.out, "makespan"), JsonNumber(old, "makespan"));
  EXPECT_EQ(JsonNumbers(result.out, "busy"), JsonNumbers(old, "busy"));
}

TEST_P(ReleaseFiles, ARequestPlansTheSameOrder) {
  ASSERT_EQ(Run({"plan", "--request", Data("request.textproto"), "-o", "plan.pb"}).exit_code, 0);
  const RunResult exported = Run({"export", "plan.pb", "--format", "torch-csv"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(exported.out, ReadData(GetParam(), "plan.csv"));
}

TEST_P(ReleaseFiles, ACostFileSimulatesToTheOldFigures) {
  const RunResult result =
      Run({"simulate", File("plan"), "--costs", Data("costs.txtpb"), "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(JsonNumber(result.out, "makespan"),
            JsonNumber(ReadData(GetParam(), "simulate_calibrated.json"), "makespan"));
}

TEST_P(ReleaseFiles, TimelinesDiffAndProfileAndProfilesCalibrate) {
  const RunResult diff = Run({"diff", File("simulated"), File("measured")});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_NE(diff.out.find("makespan"), std::string::npos) << diff.out;
  const RunResult profile = Run({"profile", File("measured"), "-o", "profile.json"});
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_EQ(Run({"calibrate", "profile.json", "-o", "a.txtpb"}).exit_code, 0);
  const RunResult old_profile = Run({"calibrate", File("profile"), "-o", "b.txtpb"});
  EXPECT_EQ(old_profile.exit_code, 0) << old_profile.err;
  // The old profile calibrates to the old cost file.
  const RunResult simulated = Run({"simulate", File("plan"), "--costs", "b.txtpb", "--json"});
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_EQ(JsonNumber(simulated.out, "makespan"),
            JsonNumber(ReadData(GetParam(), "simulate_calibrated.json"), "makespan"));
}

INSTANTIATE_TEST_SUITE_P(
    Releases, ReleaseFiles,
    ::testing::Values(Release{"release-0.1.0-b081c0f", ".json", "BeforeFileKindsJson"},
                      Release{"release-0.1.0-32d0735", ".pb", "FileFormat1Binary"}),
    ReleaseName);

TEST(ReleaseFilesBeforeFileKinds, ABinaryPlanIsRefusedWithTheWayOut) {
  ScratchDir scratch;
  const std::string plan = std::string(PIPEPLAN_TEST_DATA_DIR) + "/release-0.1.0-b081c0f/plan.pb";
  const RunResult result = RunPipeplan({"simulate", plan}, scratch.path());
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("records no file kind"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("write them again"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace pipeplan::cli_test
