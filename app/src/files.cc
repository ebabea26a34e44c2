#include "pipeplan/app/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <mutex>
#include <set>
#include <system_error>

#include "pipeplan/app/atomic_write.h"
#include "pipeplan/model/text_format.h"

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

// Inflates every gzip member of `data` (gzip files may hold several, one after another),
// handing each piece to `take`; stops early, without error, when `take` returns false.
template <typename Take>
Status Inflate(std::string_view data, const std::string& path, Take take) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    return Internal("cannot inflate '" + path + "': zlib did not start");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  char buffer[1 << 16];
  int code = Z_OK;
  while (code != Z_STREAM_END || stream.avail_in > 0) {
    if (code == Z_STREAM_END) inflateReset(&stream);  // the next member
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code != Z_OK && code != Z_STREAM_END) break;
    if (!take(std::string_view(buffer, sizeof(buffer) - stream.avail_out))) {
      inflateEnd(&stream);
      return Status::Ok();
    }
    if (code == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) break;  // ran out
  }
  const std::string reason = stream.msg != nullptr ? std::string(" (") + stream.msg + ")" : "";
  inflateEnd(&stream);
  if (code != Z_STREAM_END) {
    return InvalidArgument("cannot read '" + path + "': corrupt or truncated gzip data" + reason);
  }
  return Status::Ok();
}

Status TooLarge(const std::string& path, std::string_view what, uint64_t max_bytes) {
  return FailedPrecondition("'" + path + "' " + std::string(what) + " more than " +
                            FormatBytes(static_cast<double>(max_bytes)));
}

}  // namespace

// Counts first, keeping nothing: a file that inflates past `max_bytes` (a gzip bomb) is
// refused having used no memory for it; one that fits is inflated once more into a string
// of exactly its size.
StatusOr<std::string> Gunzip(std::string_view data, const std::string& path, uint64_t max_bytes) {
  uint64_t size = 0;
  PIPEPLAN_RETURN_IF_ERROR(Inflate(data, path, [&](std::string_view piece) {
    size += piece.size();
    return size <= max_bytes;
  }));
  if (size > max_bytes) return TooLarge(path, "inflates to", max_bytes);
  std::string out;
  out.reserve(size);
  PIPEPLAN_RETURN_IF_ERROR(Inflate(data, path, [&](std::string_view piece) {
    out.append(piece);
    return true;
  }));
  return out;
}

StatusOr<std::string> ReadMaybeGzipped(const std::string& path, uint64_t max_bytes) {
  std::error_code ec;
  if (path != "-" && std::filesystem::is_regular_file(path, ec) &&
      std::filesystem::file_size(path, ec) > max_bytes && !ec) {
    return TooLarge(path, "holds", max_bytes);
  }
  StatusOr<std::string> content = ReadFile(path);
  if (!content.ok()) return content;
  if (!IsGzip(*content)) {
    if (content->size() > max_bytes) return TooLarge(path, "holds", max_bytes);
    return content;
  }
  return Gunzip(*content, path, max_bytes);
}

namespace {

// The files this process has read, by device and inode (whatever path named them).
class InputFiles {
 public:
  static InputFiles& Get() {
    static InputFiles files;
    return files;
  }
  void Note(int fd) {
    struct stat info = {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return;
    const std::lock_guard lock(mutex_);
    read_.emplace(info.st_dev, info.st_ino);
  }
  bool Contains(const std::string& path) {
    struct stat info = {};
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return false;
    const std::lock_guard lock(mutex_);
    return read_.contains({info.st_dev, info.st_ino});
  }
  void Clear() {
    const std::lock_guard lock(mutex_);
    read_.clear();
  }

 private:
  std::mutex mutex_;
  std::set<std::pair<dev_t, ino_t>> read_;
};

}  // namespace

bool WasReadByThisProcess(const std::string& path) { return InputFiles::Get().Contains(path); }

void ForgetInputFiles() { InputFiles::Get().Clear(); }

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
  InputFiles::Get().Note(fd);
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

bool IsStandardOutput(const std::optional<std::string>& path) {
  return !path.has_value() || *path == "-";
}

Status WriteOutput(const std::optional<std::string>& path, std::string_view content) {
  if (!IsStandardOutput(path)) return WriteFileAtomic(*path, content);
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
