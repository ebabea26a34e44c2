// File helpers for the CLI: read a whole file (or standard input), and write a command's
// output to a file (atomically, see atomic_write.h) or to standard output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/model/status.h"

namespace pipeplan::app {

// The whole file; "-" reads standard input. Errors name the path and the system's reason.
StatusOr<std::string> ReadFile(const std::string& path);

// As ReadFile, inflating gzip data (a ".json.gz" trace): a file that starts with gzip's magic
// bytes is decompressed whatever its name; corrupt or truncated gzip data is an error naming
// the path. Content of more than `max_bytes` (inflated) is refused (FailedPrecondition): a file
// that inflates past it is found so by inflating without keeping anything, so the refusal costs no
// memory.
StatusOr<std::string> ReadMaybeGzipped(const std::string& path, uint64_t max_bytes);

// Gzip data (every member) inflated, or an error naming `path`: corrupt or truncated data,
// or more than `max_bytes` inflated (FailedPrecondition, found without keeping the bytes).
StatusOr<std::string> Gunzip(std::string_view data, const std::string& path, uint64_t max_bytes);

// Whether `path` names a regular file this process has read with ReadFile: the same file by
// device and inode, whatever path named it. Outputs may not replace one (atomic_write.h).
bool WasReadByThisProcess(const std::string& path);
// Forgets every file read so far: they no longer count as inputs. For a front end that runs
// several commands in one process (the Python package, after each call), so that a file one
// call read may be written by the next.
void ForgetInputFiles();

// Whether an output path means standard output: none given, or "-".
bool IsStandardOutput(const std::optional<std::string>& path);

// Writes to `path` atomically, or to standard output when there is no path or it is "-".
Status WriteOutput(const std::optional<std::string>& path, std::string_view content);

}  // namespace pipeplan::app
