#include "files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <system_error>

namespace pipeplan::cli {
namespace {

Status SystemError(const std::string& what, const std::string& path, int error) {
  return InvalidArgument("cannot " + what + " '" + path + "': " + std::strerror(error));
}

// Closes a descriptor on scope exit unless released.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

mode_t DefaultFileMode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

Status WriteAll(int fd, std::string_view content, const std::string& path) {
  while (!content.empty()) {
    const ssize_t written = ::write(fd, content.data(), content.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return SystemError("write", path, errno);
    }
    content.remove_prefix(static_cast<size_t>(written));
  }
  return Status::Ok();
}

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

Status WriteFileAtomic(const std::string& path, std::string_view content, bool create_parents) {
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  if (create_parents) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return InvalidArgument("cannot create directory '" + dir.string() + "': " + ec.message());
    }
  }
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec)) {
    return InvalidArgument("cannot write '" + path + "': is a directory");
  }
  std::string temp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return SystemError("write", path, errno);
  FdCloser closer(fd);
  auto fail = [&temp](Status status) {
    ::unlink(temp.c_str());
    return status;
  };
  if (::fchmod(fd, DefaultFileMode()) != 0) return fail(SystemError("write", path, errno));
  if (Status status = WriteAll(fd, content, path); !status.ok()) return fail(status);
  if (::fsync(fd) != 0) return fail(SystemError("write", path, errno));
  if (::close(closer.Release()) != 0) return fail(SystemError("write", path, errno));
  if (::rename(temp.c_str(), path.c_str()) != 0) return fail(SystemError("write", path, errno));
  return Status::Ok();
}

Status WriteOutput(const std::optional<std::string>& path, std::string_view content) {
  if (path.has_value() && *path != "-") return WriteFileAtomic(*path, content);
  std::cout.write(content.data(), static_cast<std::streamsize>(content.size()));
  std::cout.flush();
  if (!std::cout) return InvalidArgument("cannot write to standard output");
  return Status::Ok();
}

}  // namespace pipeplan::cli
