// What a signal must not leave behind: temp files, temp directories and child processes. The
// atomic writer (atomic_write.h) registers each temp file while it exists, the solver runner
// its directory and its process; if SIGINT, SIGTERM, SIGHUP or SIGXFSZ (a write past the file
// size limit) ends the process in that time, the handler first kills and reaps the registered
// children, then removes the registered files, then the (by then empty) directories, and
// lets the signal take its default course. Signals the process has given another handler, or
// ignores, are left alone.
#pragma once

#include <sys/types.h>

#include <string>

namespace pipeplan::app {

// One registration for the scope of the object. Thread-safe; up to 64 at once (further ones,
// and paths longer than PATH_MAX, are simply not cleaned up on a signal).
class PendingCleanup {
 public:
  PendingCleanup(PendingCleanup&& other) noexcept;
  PendingCleanup(const PendingCleanup&) = delete;
  PendingCleanup& operator=(const PendingCleanup&) = delete;
  PendingCleanup& operator=(PendingCleanup&&) = delete;
  ~PendingCleanup();

 protected:
  enum class Kind { kFile, kDirectory, kProcess };
  PendingCleanup(Kind kind, const std::string& path, pid_t pid);

 private:
  int slot_;  // -1 when not registered
};

// A file: removed.
class PendingTempFile : public PendingCleanup {
 public:
  explicit PendingTempFile(const std::string& path) : PendingCleanup(Kind::kFile, path, 0) {}
};

// An empty directory (its files registered on their own): removed after them.
class PendingTempDirectory : public PendingCleanup {
 public:
  explicit PendingTempDirectory(const std::string& path)
      : PendingCleanup(Kind::kDirectory, path, 0) {}
};

// A child process that must not outlive this one: killed (SIGKILL) and reaped.
class PendingChildProcess : public PendingCleanup {
 public:
  explicit PendingChildProcess(pid_t pid) : PendingCleanup(Kind::kProcess, "", pid) {}
};

}  // namespace pipeplan::app
