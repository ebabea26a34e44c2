// Temp files that a signal must not leave behind. The atomic writer (atomic_write.h) registers
// each temp file while it exists; if SIGINT, SIGTERM, SIGHUP or SIGXFSZ (a write past the file
// size limit) ends the process in that time, the handler removes the registered files first,
// then lets the signal take its default course. Signals the process has given another handler,
// or ignores, are left alone.
#pragma once

#include <string>

namespace pipeplan::app {

// Registers `path` for the scope of the object. Thread-safe; up to 64 files at once (further
// ones, and paths longer than PATH_MAX, are simply not cleaned up on a signal).
class PendingTempFile {
 public:
  explicit PendingTempFile(const std::string& path);
  PendingTempFile(PendingTempFile&& other) noexcept;
  PendingTempFile(const PendingTempFile&) = delete;
  PendingTempFile& operator=(const PendingTempFile&) = delete;
  PendingTempFile& operator=(PendingTempFile&&) = delete;
  ~PendingTempFile();

 private:
  int slot_;  // -1 when not registered
};

}  // namespace pipeplan::app
