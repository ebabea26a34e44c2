// File helpers for the CLI: read a whole file, and write one atomically (a temp file in the
// same directory, then rename) so that a failed command never leaves a half-written output.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/planner/status.h"

namespace pipeplan::cli {

// The whole file; "-" reads standard input. Errors name the path and the system's reason.
StatusOr<std::string> ReadFile(const std::string& path);

// Writes `content` to `path` through a temp file in the same directory and a rename; on any
// failure the temp file is removed and `path` is untouched. Creates missing parent
// directories when `create_parents` is set. The file gets the usual 0666 & ~umask mode.
Status WriteFileAtomic(const std::string& path, std::string_view content,
                       bool create_parents = false);

// Writes to `path` atomically, or to standard output when there is no path or it is "-".
Status WriteOutput(const std::optional<std::string>& path, std::string_view content);

}  // namespace pipeplan::cli
