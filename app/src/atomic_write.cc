#include "pipeplan/app/atomic_write.h"

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

#include "pipeplan/app/files.h"
#include "pipeplan/app/pending_temp_files.h"

namespace pipeplan::app {
namespace {

Status SystemError(const std::string& what, const std::string& path, int error) {
  return InvalidArgument("cannot " + what + " '" + path + "': " + std::strerror(error));
}

// What open(O_CREAT, 0666) would give. umask can only be read by setting it, which is
// process-wide, so it is read once (writers may run on several threads in pipeplan-torch).
mode_t DefaultFileMode() {
  static const mode_t mode = [] {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return 0666 & ~mask;
  }();
  return mode;
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

// Where an output goes. A regular file (or a path that does not exist yet) is replaced
// through a temp file beside it; through a symlink, that is the file the link points to, so
// the link stays. A device, FIFO or socket (-o /dev/null, a named pipe) cannot be replaced:
// renaming over it would put a regular file in its place, so it is written in place.
struct Target {
  std::string path;      // as the user gave it, for messages
  std::string replaced;  // the regular file to replace
  bool in_place = false;
  std::optional<mode_t> mode = std::nullopt;  // the replaced file's permissions, kept
};

// A regular file to replace, unless this command read it: `simulate p.pb --svg p.pb` would
// destroy its own input.
StatusOr<Target> ReplacedFile(const std::string& path, std::string replaced) {
  if (WasReadByThisProcess(replaced)) {
    return InvalidArgument("cannot write '" + path +
                           "': it is an input of this command; give the output another name");
  }
  Target target{.path = path, .replaced = std::move(replaced)};
  struct stat info = {};
  if (::stat(target.replaced.c_str(), &info) == 0) target.mode = info.st_mode & 07777;
  return target;
}

StatusOr<Target> ResolveTarget(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);  // follows links
  switch (status.type()) {
    case std::filesystem::file_type::directory:
      return InvalidArgument("cannot write '" + path + "': is a directory");
    case std::filesystem::file_type::regular: {
      if (!std::filesystem::is_symlink(path, ec)) return ReplacedFile(path, path);
      const std::filesystem::path real = std::filesystem::canonical(path, ec);
      return ReplacedFile(path, ec ? path : real.string());
    }
    case std::filesystem::file_type::not_found:
    case std::filesystem::file_type::none:
      return Target{.path = path, .replaced = path};
    case std::filesystem::file_type::symlink:  // status() follows links; not seen here
    case std::filesystem::file_type::block:
    case std::filesystem::file_type::character:
    case std::filesystem::file_type::fifo:
    case std::filesystem::file_type::socket:
    case std::filesystem::file_type::unknown:
      return Target{.path = path, .replaced = path, .in_place = true};
  }
  return Target{.path = path, .replaced = path, .in_place = true};
}

// An output ready to be put in place: its complete content in a temp file beside the file it
// replaces (removed on destruction unless committed), or, for a target written in place, the
// content to write.
class StagedFile {
 public:
  // Creates the temp file and writes, flushes and closes it.
  static StatusOr<StagedFile> Write(const std::string& path, std::string_view content,
                                    bool create_parents) {
    if (create_parents) {
      const std::filesystem::path dir = DirectoryOf(path);
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return InvalidArgument("cannot create directory '" + dir.string() + "': " + ec.message());
      }
    }
    PIPEPLAN_ASSIGN_OR_RETURN(Target target, ResolveTarget(path));
    if (target.in_place) return StagedFile(std::move(target), "", content);
    const std::filesystem::path replaced(target.replaced);
    std::string temp =
        (DirectoryOf(target.replaced) / ("." + replaced.filename().string() + ".tmp.XXXXXX"))
            .string();
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) return SystemError("write", path, errno);
    StagedFile staged(std::move(target), std::move(temp), {});
    Status status = staged.Fill(fd, content);
    if (::close(fd) != 0 && status.ok()) status = SystemError("write", path, errno);
    if (!status.ok()) return status;
    return staged;
  }

  StagedFile(StagedFile&& other) noexcept
      : target_(std::move(other.target_)),
        temp_(std::move(other.temp_)),
        pending_(std::move(other.pending_)),
        in_place_content_(other.in_place_content_) {
    other.temp_.clear();
  }
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile() {
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }

  Status Commit() {
    if (target_.in_place) return WriteInPlace();
    if (::rename(temp_.c_str(), target_.replaced.c_str()) != 0) {
      return SystemError("write", target_.path, errno);
    }
    temp_.clear();
    pending_.reset();
    // Make the rename itself durable. Best effort: some file systems cannot sync a
    // directory, and the file is in place either way.
    const int dir =
        ::open(DirectoryOf(target_.replaced).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    return Status::Ok();
  }

 private:
  StagedFile(Target target, std::string temp, std::string_view in_place_content)
      : target_(std::move(target)), temp_(std::move(temp)), in_place_content_(in_place_content) {
    if (!temp_.empty()) pending_.emplace(temp_);
  }

  Status Fill(int fd, std::string_view content) const {
    if (::fchmod(fd, target_.mode.value_or(DefaultFileMode())) != 0) {
      return SystemError("write", target_.path, errno);
    }
    PIPEPLAN_RETURN_IF_ERROR(WriteAll(fd, content, target_.path));
    if (::fsync(fd) != 0) return SystemError("write", target_.path, errno);
    return Status::Ok();
  }

  Status WriteInPlace() const {
    const int fd = ::open(target_.path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return SystemError("write", target_.path, errno);
    Status status = WriteAll(fd, in_place_content_, target_.path);
    if (::close(fd) != 0 && status.ok()) status = SystemError("write", target_.path, errno);
    return status;
  }

  Target target_;
  std::string temp_;  // empty once committed, when written in place, or when moved from
  std::optional<PendingTempFile> pending_;
  std::string_view in_place_content_;  // the caller's, alive until Commit
};

// Each path once: "'x' is given for two outputs" otherwise.
Status DistinctPaths(const std::vector<std::string>& paths) {
  std::set<std::filesystem::path> targets;
  for (const std::string& path : paths) {
    std::error_code ec;
    std::filesystem::path target = std::filesystem::absolute(path, ec).lexically_normal();
    if (!ec && !targets.insert(std::move(target)).second) {
      return InvalidArgument("'" + path + "' is given for two outputs");
    }
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view content, bool create_parents) {
  PIPEPLAN_ASSIGN_OR_RETURN(StagedFile staged, StagedFile::Write(path, content, create_parents));
  return staged.Commit();
}

Status CheckOutputPaths(const std::vector<std::optional<std::string>>& paths) {
  std::vector<std::string> given;
  for (const std::optional<std::string>& path : paths) {
    if (path.has_value() && !path->empty() && *path != "-") given.push_back(*path);
  }
  PIPEPLAN_RETURN_IF_ERROR(DistinctPaths(given));
  for (const std::string& path : given) PIPEPLAN_RETURN_IF_ERROR(ResolveTarget(path).status());
  return Status::Ok();
}

Status WriteFilesAtomic(const std::vector<OutputFile>& files, bool create_parents) {
  std::vector<std::string> paths;
  paths.reserve(files.size());
  for (const OutputFile& file : files) paths.push_back(file.path);
  PIPEPLAN_RETURN_IF_ERROR(DistinctPaths(paths));
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

}  // namespace pipeplan::app
