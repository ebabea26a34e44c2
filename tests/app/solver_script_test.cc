// Where the CP-SAT runner looks for its script: the user's choice alone, else beside the
// binary and where an install puts it, then the source tree.
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeplan/app/cp_sat_solver.h"

namespace pipeplan::app {
namespace {

// Sets (or unsets) an environment variable for the test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(SolverScriptPlaces, BesideTheBinaryThenTheInstallsShareThenTheSourceTree) {
  const ScopedEnv unset("PIPEPLAN_SOLVER_SCRIPT", nullptr);
  const std::vector<std::string> places = SolverScriptPlaces("/opt/pp/bin/pipeplan");
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[0], "/opt/pp/bin/pipeplan_solver.py");
  EXPECT_EQ(places[1], "/opt/pp/bin/../share/pipeplan/pipeplan_solver.py");
  EXPECT_TRUE(places[2].ends_with("/python/pipeplan_solver.py")) << places[2];
}

TEST(SolverScriptPlaces, AScriptTheUserNamesIsTheOnlyOne) {
  const ScopedEnv set("PIPEPLAN_SOLVER_SCRIPT", "/tmp/mine.py");
  EXPECT_EQ(SolverScriptPlaces("/opt/pp/bin/pipeplan"), std::vector<std::string>{"/tmp/mine.py"});
}

}  // namespace
}  // namespace pipeplan::app
