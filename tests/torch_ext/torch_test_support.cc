#include "torch_test_support.h"

#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace pipeplan::torch_ext::testing {

TempDir::TempDir(const std::string& name) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("pipeplan-torch-" + name + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Not std::filesystem::remove_all: libtorch.so exports its own copy of that symbol, which
// crashes when it wins the symbol lookup.
TempDir::~TempDir() {
  if (path_.empty()) return;
  nftw(
      path_.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

namespace {

std::string Quote(const std::string& word) {
  std::string quoted = "'";
  for (const char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

}  // namespace

CommandResult RunTorchTool(const std::vector<std::string>& args, int timeout_seconds) {
  // The environment's wins: a test binary moved out of its build tree (scripts/gpu_bundle.sh).
  const char* binary = std::getenv("PIPEPLAN_TORCH_BINARY");
  std::string command = "timeout -k 5 " + std::to_string(timeout_seconds) + " " +
                        Quote(binary != nullptr ? binary : PIPEPLAN_TORCH_BINARY);
  for (const std::string& a : args) command += " " + Quote(a);
  command += " 2>&1";
  CommandResult result;
  const auto begin = std::chrono::steady_clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace pipeplan::torch_ext::testing
