#include "cli_runner.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "gtest/gtest.h"

extern char** environ;

namespace pipeplan::cli_test {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

ScratchDir::ScratchDir() {
  std::string pattern = ::testing::TempDir() + "pipeplan_cli_XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
  path_ = std::filesystem::canonical(pattern).string();
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void ScratchDir::Write(const std::string& name, const std::string& content) const {
  const std::filesystem::path file = File(name);
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out << content;
}

std::string ScratchDir::Read(const std::string& name) const { return ReadAll(File(name)); }

bool ScratchDir::Exists(const std::string& name) const {
  return std::filesystem::exists(File(name));
}

std::vector<std::string> ScratchDir::List() const {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path_)) {
    names.push_back(entry.path().lexically_relative(path_).string());  // symlinks as named
  }
  std::sort(names.begin(), names.end());
  return names;
}

RunResult RunPipeplan(const std::vector<std::string>& args, const std::string& cwd,
                      const ChildLimits& limits) {
  // Captures go outside `cwd`, so tests can list what the command wrote.
  ScratchDir capture;
  const std::string out_path = capture.File("stdout");
  const std::string err_path = capture.File("stderr");

  std::vector<std::string> argv_storage = {PIPEPLAN_CLI_PATH};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::vector<std::string> environment_storage;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view entry(*variable);
    const bool replaced =
        std::any_of(limits.environment.begin(), limits.environment.end(),
                    [&](const auto& set) { return entry.starts_with(set.first + "="); });
    if (!replaced) environment_storage.emplace_back(entry);
  }
  for (const auto& [name, value] : limits.environment) {
    environment_storage.push_back(name + "=" + value);
  }
  std::vector<char*> environment;
  for (std::string& variable : environment_storage) environment.push_back(variable.data());
  environment.push_back(nullptr);
  const std::string stdout_target = limits.stdout_path.value_or(out_path);

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    const int out = ::open(stdout_target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    if (limits.max_file_bytes.has_value()) {
      const rlimit file_size = {*limits.max_file_bytes, *limits.max_file_bytes};
      if (::setrlimit(RLIMIT_FSIZE, &file_size) != 0) ::_exit(127);
    }
    // An ignored signal stays ignored across exec.
    if (limits.ignore_file_size_signal) ::signal(SIGXFSZ, SIG_IGN);
    ::execve(argv[0], argv.data(), environment.data());
    ::_exit(127);
  }
  if (limits.while_running) limits.while_running(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.out = limits.stdout_path.has_value() ? "" : ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

// The number after "key": in a flat JSON object.
double JsonNumber(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = json.find(needle);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << key << " in " << json;
    return -1;
  }
  return std::strtod(json.c_str() + at + needle.size(), nullptr);
}

// The numbers of "key":[a,b,...].
std::vector<double> JsonNumbers(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":[";
  const size_t at = json.find(needle);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no array " << key << " in " << json;
    return {};
  }
  std::vector<double> values;
  const char* p = json.c_str() + at + needle.size();
  while (*p != ']' && *p != '\0') {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    if (end == p) break;
    p = end;
    if (*p == ',') ++p;
  }
  return values;
}

// The whitespace-separated words of the first line of `text` whose words start with
// `prefix` (e.g. {"*", "zbv"} or {"3", "dualpipe", "2"}); empty when there is none.
std::vector<std::string> LineStartingWith(const std::string& text,
                                          const std::vector<std::string>& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.size() >= prefix.size() &&
        std::equal(prefix.begin(), prefix.end(), tokens.begin())) {
      return tokens;
    }
  }
  return {};
}

// The makespan printed by `simulate --json` for a plan built by `plan_args` (plus -o p.pb).
double PlannedMakespan(std::vector<std::string> plan_args, const ScratchDir& dir) {
  plan_args.insert(plan_args.end(), {"-o", "p.pb"});
  const RunResult plan = RunPipeplan(plan_args, dir.path());
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  const RunResult sim = RunPipeplan({"simulate", "p.pb", "--json"}, dir.path());
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  return JsonNumber(sim.out, "makespan");
}

}  // namespace pipeplan::cli_test
