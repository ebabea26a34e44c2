#include "local_launcher.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include "pipeplan/app/command.h"
#include "pipeplan/torch_ext/gloo_transport.h"

namespace pipeplan::torch_ext {
namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

}  // namespace

int LaunchLocalRanks(int ranks, double timeout_s, const std::vector<std::string>& argv) {
  const int port = FreeLocalPort();
  if (port == 0) {
    std::cerr << "pipeplan-torch: error: no free TCP port on 127.0.0.1 for the rendezvous\n";
    return app::kExitInvalidInput;
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::map<pid_t, int> running;  // pid -> rank
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      if (entry.starts_with("RANK=") || entry.starts_with("WORLD_SIZE=") ||
          entry.starts_with("MASTER_ADDR=") || entry.starts_with("MASTER_PORT=") ||
          entry.starts_with("LOCAL_RANK=")) {
        continue;
      }
      env.emplace_back(entry);
    }
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(ranks));
    env.emplace_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), envp.data()) != 0) {
      std::cerr << "pipeplan-torch: error: could not start rank " << r << "\n";
      for (const auto& [child, rank] : running) kill(child, SIGKILL);
      for (const auto& [child, rank] : running) waitpid(child, nullptr, 0);
      return app::kExitInvalidInput;
    }
    running[pid] = r;
  }
  int exit_code = app::kExitOk;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid) != 0) {
      const int rank = running[pid];
      running.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::cerr << "pipeplan-torch: rank " << rank << " " << DescribeExit(status) << "\n";
        exit_code = app::kExitInvalidInput;
        if (!kill_at) {
          kill_at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000) + 5000);
        }
      }
      continue;
    }
    if (kill_at && !killed && std::chrono::steady_clock::now() > *kill_at) {
      for (const auto& [child, rank] : running) {
        std::cerr << "pipeplan-torch: rank " << rank << " did not stop within the timeout; "
                  << "killing it\n";
        kill(child, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code;
}

}  // namespace pipeplan::torch_ext
