#include "pipeplan/app/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <system_error>

#include "pipeplan/app/atomic_write.h"

namespace pipeplan::app {
namespace {

Status SystemError(const std::string& what, const std::string& path, int error) {
  return InvalidArgument("cannot " + what + " '" + path + "': " + std::strerror(error));
}

// Closes a descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() { ::close(fd_); }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("cannot read '" + path + "': is a directory");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SystemError("read", path, errno);
  FdCloser closer(fd);
  std::string content;
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      return SystemError("read", path, errno);
    }
    if (got == 0) break;
    content.append(buffer, static_cast<size_t>(got));
  }
  return content;
}

Status WriteOutput(const std::optional<std::string>& path, std::string_view content) {
  if (path.has_value() && *path != "-") return WriteFileAtomic(*path, content);
  std::cout.write(content.data(), static_cast<std::streamsize>(content.size()));
  std::cout.flush();
  if (!std::cout) return InvalidArgument("cannot write to standard output");
  return Status::Ok();
}

}  // namespace pipeplan::app
