#include "pipeplan/app/pending_temp_files.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <mutex>

namespace pipeplan::app {
namespace {

constexpr int kSlots = 64;
constexpr int kSignals[] = {SIGHUP, SIGINT, SIGTERM, SIGXFSZ};

// A slot is claimed (used) by one thread, filled, then published (ready) for the handler,
// which may run at any point: it reads only published slots and calls only async-signal-safe
// functions (kill, waitpid, unlink, rmdir, raise).
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<bool> ready{false};
  int kind = 0;  // a PendingTempFile::Kind
  pid_t pid = 0;
  char path[PATH_MAX] = {};
};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler reads these flags");

Slot g_slots[kSlots];

// The handler's order: children first (a solver could still write into the directory), then
// files, then the directories they were in.
constexpr int kCleanupOrder[] = {2, 0, 1};  // kProcess, kFile, kDirectory

extern "C" void RemovePendingAndReraise(int signal_number) {
  const int saved_errno = errno;
  for (const int kind : kCleanupOrder) {
    for (Slot& slot : g_slots) {
      if (!slot.ready.load(std::memory_order_acquire) || slot.kind != kind) continue;
      if (kind == 2) {
        ::kill(slot.pid, SIGKILL);
        while (::waitpid(slot.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      } else if (kind == 0) {
        ::unlink(slot.path);
      } else {
        ::rmdir(slot.path);
      }
    }
  }
  errno = saved_errno;
  // SA_RESETHAND restored the default action; the signal is blocked until this returns.
  ::raise(signal_number);
}

void InstallHandlers() {
  for (const int signal_number : kSignals) {
    struct sigaction current = {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    const bool is_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
    if (!is_default) continue;  // ignored (nohup) or someone else's handler
    struct sigaction action = {};
    action.sa_handler = RemovePendingAndReraise;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    ::sigaction(signal_number, &action, nullptr);
  }
}

int Register(int kind, const std::string& path, pid_t pid) {
  static std::once_flag installed;
  std::call_once(installed, InstallHandlers);
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
      continue;
    }
    g_slots[i].kind = kind;
    g_slots[i].pid = pid;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].ready.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

}  // namespace

PendingCleanup::PendingCleanup(Kind kind, const std::string& path, pid_t pid)
    : slot_(Register(static_cast<int>(kind), path, pid)) {
  static_assert(static_cast<int>(Kind::kFile) == 0 && static_cast<int>(Kind::kDirectory) == 1 &&
                static_cast<int>(Kind::kProcess) == 2);
}

PendingCleanup::PendingCleanup(PendingCleanup&& other) noexcept : slot_(other.slot_) {
  other.slot_ = -1;
}

PendingCleanup::~PendingCleanup() {
  if (slot_ < 0) return;
  g_slots[slot_].ready.store(false, std::memory_order_release);
  g_slots[slot_].used.store(false, std::memory_order_release);
}

}  // namespace pipeplan::app
