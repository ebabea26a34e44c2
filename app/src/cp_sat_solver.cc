#include "pipeplan/app/cp_sat_solver.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "pipeplan/app/files.h"
#include "pipeplan/app/pending_temp_files.h"
#include "pipeplan/formats/solver_files.h"
#include "pipeplan/model/text_format.h"

#ifndef PIPEPLAN_SOLVER_PYTHON
#define PIPEPLAN_SOLVER_PYTHON ""
#endif
#ifndef PIPEPLAN_SOLVER_SCRIPT
#define PIPEPLAN_SOLVER_SCRIPT ""
#endif

extern char** environ;

namespace pipeplan::app {
namespace {

constexpr std::string_view kInstall =
    "pip install 'pipeplan[solver]' installs it with the Python package, bash "
    "scripts/setup_solver.sh for a build from source, or set PIPEPLAN_SOLVER_PYTHON to a Python "
    "with the ortools package";
// The solver script's exit codes when ortools is missing, and when it is there but its import
// fails (a mismatched protobuf, a broken install).
constexpr int kNoOrtools = 3;
constexpr int kOrtoolsBroken = 4;
// The script stops itself within its wall cap (pipeplan_solver.py's wall_cap: 10 times the
// time limit plus 5 minutes, for a machine ten times slower than usual); past that and this
// grace (Python's start, the model's build) it is hung, and killed.
double SolverWallCap(double time_limit_s) { return 10 * time_limit_s + 300; }
constexpr double kSolverGrace = 120;

std::string SettingOr(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : built_in;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended abnormally";
}

// A private directory for the instance and the result, removed with its files, also when a
// signal ends the process.
class TempDir {
 public:
  static StatusOr<std::unique_ptr<TempDir>> Make() {
    std::error_code error;
    const std::filesystem::path base = std::filesystem::temp_directory_path(error);
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string where = tmpdir != nullptr && *tmpdir != '\0' ? std::string("TMPDIR=") + tmpdir
                                                                   : "the temporary directory";
    if (error) {
      return FailedPrecondition("no directory for the solver's files: " + where + " is " +
                                error.message());
    }
    std::string pattern = (base / "pipeplan-solver-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return FailedPrecondition("cannot create the solver's directory in " + where + " (" +
                                base.string() + "): " + std::strerror(errno));
    }
    return std::unique_ptr<TempDir>(new TempDir(pattern));
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)), pending_(path_) {}
  std::string path_;
  app::PendingTempDirectory pending_;
};

// Waits for `pid`; kills it past `deadline_s` seconds from now (counted in seconds, so any
// time limit is a deadline, however far).
StatusOr<int> WaitFor(pid_t pid, double deadline_s) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return Internal("waiting for the solver failed");
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > deadline_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return DeadlineExceeded("the solver did not stop within " + FormatNumber(deadline_s) +
                              " s of its start (its own clock cap, 10 times its time limit " +
                              "plus 5 minutes, and 2 minutes more); killed it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::vector<std::string> SolverScriptPlaces(const std::string& binary) {
  // A script the user names is the only one: never another behind their back.
  if (const std::string set = SettingOr("PIPEPLAN_SOLVER_SCRIPT", ""); !set.empty()) return {set};
  std::vector<std::string> places;
  if (!binary.empty()) {
    const std::filesystem::path dir = std::filesystem::path(binary).parent_path();
    places.push_back((dir / "pipeplan_solver.py").string());
    places.push_back((dir / ".." / "share" / "pipeplan" / "pipeplan_solver.py").string());
  }
  if (*PIPEPLAN_SOLVER_SCRIPT != '\0') places.emplace_back(PIPEPLAN_SOLVER_SCRIPT);
  return places;
}

namespace {

// The file this code was loaded from: the executable, or the shared library linking it.
std::string ThisBinary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&SolverScriptPlaces), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::error_code error;
  const std::filesystem::path path = std::filesystem::canonical(info.dli_fname, error);
  if (!error) return path.string();
  // The main program's name as it was run, which may be bare: the kernel knows where it is.
  const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe", error);
  return error ? "" : self.string();
}

// The first place of SolverScriptPlaces holding a readable script, or an error naming them all.
StatusOr<std::string> FindSolverScript() {
  const std::vector<std::string> places = SolverScriptPlaces(ThisBinary());
  for (const std::string& place : places) {
    if (access(place.c_str(), R_OK) == 0) return place;
  }
  std::string looked;
  for (const std::string& place : places) looked += (looked.empty() ? "" : ", ") + place;
  return FailedPrecondition("the solver script is missing (looked for " +
                            (looked.empty() ? std::string("it nowhere") : looked) +
                            "): set PIPEPLAN_SOLVER_SCRIPT to python/pipeplan_solver.py of "
                            "pipeplan's source tree");
}

}  // namespace

StatusOr<SolverOutcome> RunCpSat(const SolverInstance& instance) {
  const std::string python = SettingOr("PIPEPLAN_SOLVER_PYTHON", PIPEPLAN_SOLVER_PYTHON);
  if (python.empty() || access(python.c_str(), X_OK) != 0) {
    return FailedPrecondition(
        "the optimal strategies need OR-Tools' CP-SAT solver, and no "
        "Python with it is known" +
        (python.empty() ? std::string() : " (" + python + " is missing)") + ": " +
        std::string(kInstall));
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string script, FindSolverScript());
  PIPEPLAN_ASSIGN_OR_RETURN(const std::unique_ptr<TempDir> dir, TempDir::Make());
  const std::string instance_path = dir->path() + "/instance.json";
  const std::string result_path = dir->path() + "/result.txt";
  const app::PendingTempFile pending_instance(instance_path);
  const app::PendingTempFile pending_result(result_path);
  {
    std::ofstream out(instance_path, std::ios::binary);
    out << SolverInstanceJson(instance);
    if (!out.flush()) return Internal("could not write the solver's instance to " + instance_path);
  }
  std::vector<std::string> args = {python, script, instance_path, result_path};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int error = posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
      error != 0) {
    return FailedPrecondition("could not start the solver (" + python +
                              "): " + std::strerror(error) + "; " + std::string(kInstall));
  }
  const app::PendingChildProcess pending_solver(pid);
  PIPEPLAN_ASSIGN_OR_RETURN(const int status,
                            WaitFor(pid, SolverWallCap(instance.time_limit_s) + kSolverGrace));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kNoOrtools) {
    return FailedPrecondition(python + " has no ortools package: " + std::string(kInstall));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == kOrtoolsBroken) {
    return FailedPrecondition(python + " has ortools, but it does not import (the error is " +
                              "above): " + std::string(kInstall));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Internal("the solver (" + script + ") " + DescribeExit(status) +
                    "; its messages are above");
  }
  PIPEPLAN_ASSIGN_OR_RETURN(const std::string text, app::ReadFile(result_path));
  return ParseSolverOutcome(text, instance.ops.size());
}

}  // namespace pipeplan::app
