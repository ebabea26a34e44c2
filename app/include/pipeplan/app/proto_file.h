// Reading a pipeplan file for a command. The file must hold the kind the command reads; when it
// holds another kind, is empty or is a torch CSV, the error names the file, says what it is and
// how to write the kind expected ("t.pb is a plan file; a timeline file is expected here: write
// one with 'pipeplan simulate PLAN --timeline FILE' ...").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/status.h"

namespace pipeplan::app {

// The format an output is written in: text on standard output (IsStandardOutput), else as
// its path's extension says (DetectProtoFormat).
ProtoFormat OutputFormat(const std::optional<std::string>& path);

struct ProtoFile {
  std::string content;
  ProtoFormat format = ProtoFormat::kBinary;
};

// Reads `path` ("-": standard input); refuses an empty file and a torch CSV, naming them.
StatusOr<ProtoFile> ReadProtoFile(const std::string& path, FileKind expected);

// The error for `file` failing to parse as `expected`: when the file records another kind,
// what it is and how to write the kind expected; else `status` with the path.
Status ExplainParseError(const std::string& path, const ProtoFile& file, FileKind expected,
                         const Status& status);

// ReadProtoFile, then `parse` (ParsePlan, ParseTimelineFile, ...); errors start with the path.
template <typename T>
StatusOr<T> LoadProtoFile(const std::string& path, FileKind expected,
                          StatusOr<T> (*parse)(std::string_view, ProtoFormat)) {
  PIPEPLAN_ASSIGN_OR_RETURN(const ProtoFile file, ReadProtoFile(path, expected));
  StatusOr<T> parsed = parse(file.content, file.format);
  if (!parsed.ok()) return ExplainParseError(path, file, expected, parsed.status());
  return parsed;
}

}  // namespace pipeplan::app
