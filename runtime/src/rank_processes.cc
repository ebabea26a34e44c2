#include "pipeplan/runtime/rank_processes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pipeplan::runtime {
namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

// This process's own arguments, as the kernel keeps them (NUL-separated).
StatusOr<std::vector<std::string>> OwnCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string word; std::getline(in, word, '\0');) argv.push_back(word);
  if (argv.empty()) return Internal("cannot read this process's arguments (/proc/self/cmdline)");
  return argv;
}

}  // namespace

int FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

Status LaunchLocalRanks(int ranks, double timeout_s, std::string_view program) {
  PIPEPLAN_ASSIGN_OR_RETURN(const std::vector<std::string> argv, OwnCommandLine());
  const int port = FreeLocalPort();
  if (port == 0) return FailedPrecondition("no free TCP port on 127.0.0.1 for the rendezvous");
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
    if (const int error =
            posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args.data(), envp.data());
        error != 0) {
      for (const auto& [child, rank] : running) kill(child, SIGKILL);
      for (const auto& [child, rank] : running) waitpid(child, nullptr, 0);
      return Internal("could not start rank " + std::to_string(r) + ": " + std::strerror(error));
    }
    running[pid] = r;
  }
  std::string failed;  // "rank 1 exited with code 1; rank 0 ..."
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  bool killed = false;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid) != 0) {
      const int rank = running[pid];
      running.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        const std::string ended = "rank " + std::to_string(rank) + " " + DescribeExit(status);
        // Said at once: the others may take up to the timeout to stop.
        std::cerr << program << ": " << ended << "\n";
        failed += (failed.empty() ? "" : "; ") + ended;
        if (!kill_at) {
          kill_at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000) + 5000);
        }
      }
      continue;
    }
    if (kill_at && !killed && std::chrono::steady_clock::now() > *kill_at) {
      for (const auto& [child, rank] : running) {
        std::cerr << program << ": rank " << rank << " did not stop within the timeout; "
                  << "killing it\n";
        kill(child, SIGKILL);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (failed.empty()) return Status::Ok();
  return FailedPrecondition(failed + " (what each rank said is above)");
}

}  // namespace pipeplan::runtime
