#include "pipeplan/app/files.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

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

bool IsGzip(const std::string& data) { return data.starts_with("\x1f\x8b"); }

// Inflates every gzip member of `data` (gzip files may hold several, one after another).
StatusOr<std::string> Gunzip(std::string_view data, const std::string& path) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    return Internal("cannot inflate '" + path + "': zlib did not start");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int code = Z_OK;
  while (code != Z_STREAM_END || stream.avail_in > 0) {
    if (code == Z_STREAM_END) inflateReset(&stream);  // the next member
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code != Z_OK && code != Z_STREAM_END) break;
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (code == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) break;  // ran out
  }
  const std::string reason = stream.msg != nullptr ? std::string(" (") + stream.msg + ")" : "";
  inflateEnd(&stream);
  if (code != Z_STREAM_END) {
    return InvalidArgument("cannot read '" + path + "': corrupt or truncated gzip data" + reason);
  }
  return out;
}

}  // namespace

StatusOr<std::string> ReadMaybeGzipped(const std::string& path) {
  StatusOr<std::string> content = ReadFile(path);
  if (!content.ok() || !IsGzip(*content)) return content;
  return Gunzip(*content, path);
}

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
  if (!std::cout) {
    // The reader closed the pipe early (`| head`): it has what it wanted, nothing is lost.
    if (errno == EPIPE) return Status::Ok();
    return InvalidArgument("cannot write to standard output");
  }
  return Status::Ok();
}

}  // namespace pipeplan::app
