// Helpers for the torch extension's tests: a temporary directory and running the
// pipeplan-torch binary (built beside the tests) with a bounded time.
#pragma once

#include <string>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  double seconds = 0.0;
};

// The whole file; NotFound naming it when it cannot be read.
StatusOr<std::string> ReadFile(const std::string& path);

// Runs pipeplan-torch with `args`, killed after `timeout_seconds`.
CommandResult RunTorchTool(const std::vector<std::string>& args, int timeout_seconds = 240);

}  // namespace pipeplan::torch_ext::testing
