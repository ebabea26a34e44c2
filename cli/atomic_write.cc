#include "atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

#include "pending_temp_files.h"

namespace pipeplan::cli {
namespace {

Status SystemError(const std::string& what, const std::string& path, int error) {
  return InvalidArgument("cannot " + what + " '" + path + "': " + std::strerror(error));
}

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

std::filesystem::path DirectoryOf(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? "." : dir;
}

// A target's complete content in a temp file beside it, not yet renamed into place. The temp
// file is removed on destruction unless it was committed.
class StagedFile {
 public:
  // Creates the temp file and writes, flushes and closes it.
  static StatusOr<StagedFile> Write(const std::string& path, std::string_view content,
                                    bool create_parents) {
    const std::filesystem::path dir = DirectoryOf(path);
    if (create_parents) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return InvalidArgument("cannot create directory '" + dir.string() + "': " + ec.message());
      }
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return InvalidArgument("cannot write '" + path + "': is a directory");
    }
    std::string temp =
        (dir / ("." + std::filesystem::path(path).filename().string() + ".tmp.XXXXXX")).string();
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) return SystemError("write", path, errno);
    StagedFile staged(path, std::move(temp));
    Status status = staged.Fill(fd, content);
    if (::close(fd) != 0 && status.ok()) status = SystemError("write", path, errno);
    if (!status.ok()) return status;
    return staged;
  }

  StagedFile(StagedFile&& other) noexcept
      : path_(std::move(other.path_)),
        temp_(std::move(other.temp_)),
        pending_(std::move(other.pending_)) {
    other.temp_.clear();
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile() {
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }

  Status Commit() {
    if (::rename(temp_.c_str(), path_.c_str()) != 0) return SystemError("write", path_, errno);
    temp_.clear();
    pending_.reset();
    // Make the rename itself durable. Best effort: some file systems cannot sync a
    // directory, and the file is in place either way.
    const int dir = ::open(DirectoryOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    return Status::Ok();
  }

 private:
  StagedFile(std::string path, std::string temp)
      : path_(std::move(path)), temp_(std::move(temp)), pending_(PendingTempFile(temp_)) {}

  Status Fill(int fd, std::string_view content) const {
    if (::fchmod(fd, DefaultFileMode()) != 0) return SystemError("write", path_, errno);
    PIPEPLAN_RETURN_IF_ERROR(WriteAll(fd, content, path_));
    if (::fsync(fd) != 0) return SystemError("write", path_, errno);
    return Status::Ok();
  }

  std::string path_;
  std::string temp_;  // empty once committed (or moved from)
  std::optional<PendingTempFile> pending_;
};

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view content, bool create_parents) {
  PIPEPLAN_ASSIGN_OR_RETURN(StagedFile staged, StagedFile::Write(path, content, create_parents));
  return staged.Commit();
}

Status WriteFilesAtomic(const std::vector<OutputFile>& files, bool create_parents) {
  std::set<std::filesystem::path> targets;
  for (const OutputFile& file : files) {
    std::error_code ec;
    std::filesystem::path target = std::filesystem::absolute(file.path, ec).lexically_normal();
    if (!ec && !targets.insert(std::move(target)).second) {
      return InvalidArgument("'" + file.path + "' is given for two outputs");
    }
  }
  std::vector<StagedFile> staged;
  staged.reserve(files.size());
  for (const OutputFile& file : files) {
    PIPEPLAN_ASSIGN_OR_RETURN(StagedFile written,
                              StagedFile::Write(file.path, file.content, create_parents));
    staged.push_back(std::move(written));
  }
  for (StagedFile& file : staged) PIPEPLAN_RETURN_IF_ERROR(file.Commit());
  return Status::Ok();
}

}  // namespace pipeplan::cli
