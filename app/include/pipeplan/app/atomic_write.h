// The one way the command-line tools (pipeplan, pipeplan-torch) write files: atomically, so
// that a failed or interrupted command never leaves a half-written output. Each file is
// written to a temp file in its own directory, flushed to disk (fsync), then renamed over the
// target; on any failure the temp file is removed and the target is untouched, and a signal
// that ends the process removes it too (pending_temp_files.h). Through a symlink the file it
// points to is replaced and the link kept; a device, FIFO or socket (/dev/null, a named pipe)
// cannot be replaced and is written in place.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::app {

struct OutputFile {
  std::string path;
  std::string content;
};

// Writes `content` to `path`. Creates missing parent directories when `create_parents` is set.
// A new file gets the usual 0666 & ~umask mode, a replaced one keeps its own. A file this
// process has read (files.h) is not replaced: an error says it is an input. Errors name the
// path and the system's reason.
Status WriteFileAtomic(const std::string& path, std::string_view content,
                       bool create_parents = false);

// All or nothing, for a command with several outputs: every file is written to its temp file
// first, and only when all of them are on disk are they renamed into place. Any failure before
// the renames leaves every target untouched; a path may not be given twice.
Status WriteFilesAtomic(const std::vector<OutputFile>& files, bool create_parents = false);

// Before long work (a run, a profile): whether each path could be written as
// WriteFilesAtomic writes it (not a directory, not an input of this command, no path for two
// outputs), so that a bad output path is named before the work, not after it is lost. Unset
// paths and "-" (standard output) are skipped; writing checks again.
Status CheckOutputPaths(const std::vector<std::optional<std::string>>& paths);

}  // namespace pipeplan::app
