// Runs the built pipeplan binary in a scratch directory and captures what it prints, for the
// CLI's end-to-end tests.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipeplan::cli_test {

struct RunResult {
  int exit_code = -1;  // -1 when the process did not exit normally
  int signal = 0;      // the signal that ended it, 0 when it exited
  std::string out;
  std::string err;
};

// What the child gets besides its arguments, to make writes fail or runs end on purpose.
struct ChildLimits {
  // RLIMIT_FSIZE: a write past this many bytes of a file raises SIGXFSZ (which by default
  // ends the process, as an interruption would) or, when the signal is ignored, fails.
  std::optional<uint64_t> max_file_bytes = std::nullopt;
  bool ignore_file_size_signal = false;
  // Variables set in the child's environment (NAME, value).
  std::vector<std::pair<std::string, std::string>> environment = {};
  // Standard output to this file (e.g. /dev/full) instead of the captured one.
  std::optional<std::string> stdout_path = std::nullopt;
  // Called in the parent while the child runs (e.g. to signal it); the child is then waited for.
  std::function<void(pid_t)> while_running = nullptr;
};

// A fresh empty directory under the test temp dir, removed with everything in it on
// destruction.
class ScratchDir {
 public:
  ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();

  const std::string& path() const { return path_; }
  // Absolute path of `name` inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& content) const;
  std::string Read(const std::string& name) const;
  bool Exists(const std::string& name) const;
  // Names of the entries (recursively, relative, sorted).
  std::vector<std::string> List() const;

 private:
  std::string path_;
};

// Runs `pipeplan args...` with `cwd` as the working directory (no shell involved).
RunResult RunPipeplan(const std::vector<std::string>& args, const std::string& cwd,
                      const ChildLimits& limits = {});

// Reading what a command printed. JsonNumber and JsonNumbers add a test failure when the key
// is missing.
// The number after "key": in a flat JSON object.
double JsonNumber(const std::string& json, const std::string& key);
// The numbers of "key":[a,b,...].
std::vector<double> JsonNumbers(const std::string& json, const std::string& key);
// The whitespace-separated words of the first line of `text` whose words start with
// `prefix` (e.g. {"*", "zbv"} or {"3", "dualpipe", "2"}); empty when there is none.
std::vector<std::string> LineStartingWith(const std::string& text,
                                          const std::vector<std::string>& prefix);
// The makespan printed by `simulate --json` for a plan built by `plan_args` (plus -o p.pb).
double PlannedMakespan(std::vector<std::string> plan_args, const ScratchDir& dir);

// Expected stderr of a failed command.
// "pipeplan <command>: error: <message>" plus the pointer to --help; exit code 2.
inline std::string Usage(const std::string& command, const std::string& message) {
  const std::string prefix = command.empty() ? "pipeplan" : "pipeplan " + command;
  return prefix + ": error: " + message + "\nrun '" + prefix + " --help' for usage\n";
}

// "pipeplan <command>: error: <message>"; exit code 1.
inline std::string Input(const std::string& command, const std::string& message) {
  return "pipeplan " + command + ": error: " + message + "\n";
}

}  // namespace pipeplan::cli_test
