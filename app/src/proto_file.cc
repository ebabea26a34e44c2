#include "pipeplan/app/proto_file.h"

#include <utility>

#include "pipeplan/app/files.h"
#include "pipeplan/formats/torch_csv.h"

namespace pipeplan::app {

ProtoFormat OutputFormat(const std::optional<std::string>& path) {
  return IsStandardOutput(path) ? ProtoFormat::kText : DetectProtoFormat(*path, "");
}
namespace {

// How a file of `kind` is written, to follow "write one " in error messages.
std::string_view HowToWrite(FileKind kind) {
  switch (kind) {
    case FileKind::kPlan:
      return "with 'pipeplan plan ... -o FILE' or 'pipeplan import ... -o FILE'";
    case FileKind::kRequest:
      return "by hand: a PlanRequest in text or JSON (docs/cli.md, 'A request file')";
    case FileKind::kCostModel:
      return "with 'pipeplan calibrate PROFILE -o FILE', or by hand: a CostModel in text or "
             "JSON (docs/cli.md, 'Costs')";
    case FileKind::kTimeline:
      return "with 'pipeplan simulate PLAN --timeline FILE' or 'pipeplan run PLAN --timeline "
             "FILE'";
    case FileKind::kProfile:
      return "with 'pipeplan profile TIMELINE... -o FILE' or 'pipeplan-torch profile ... -o "
             "FILE'";
    case FileKind::kLayerCosts:
      return "by hand: a LayerCosts in text or JSON (docs/planning.md, 'Layer costs')";
  }
  return "";
}

std::string Expected(FileKind kind) { return "a " + std::string(FileKindName(kind)) + " file"; }

}  // namespace

StatusOr<ProtoFile> ReadProtoFile(const std::string& path, FileKind expected) {
  PIPEPLAN_ASSIGN_OR_RETURN(std::string content, ReadFile(path));
  const std::string wanted = Expected(expected);
  if (content.empty()) {
    return InvalidArgument(path + " is empty; " + wanted + " is expected here: write one " +
                           std::string(HowToWrite(expected)));
  }
  if (LooksLikeTorchCsv(content)) {
    return InvalidArgument(path + " is a torch pipelining CSV, not " + wanted +
                           ": make a plan of it with 'pipeplan import --format torch-csv " + path +
                           " -o plan.pb' (--format torch-csv-comms for torch's _dump_csv files)");
  }
  const ProtoFormat format = DetectProtoFormat(path, content);
  return ProtoFile{std::move(content), format};
}

Status ExplainParseError(const std::string& path, const ProtoFile& file, FileKind expected,
                         const Status& status) {
  // Read leniently only now: a file that parses records its kind in what it parsed to.
  const StatusOr<FileHeader> header = ReadFileHeader(file.content, file.format);
  if (header.ok() && header->kind.has_value() && *header->kind != expected) {
    return InvalidArgument(path + " is a " + std::string(FileKindName(*header->kind)) + " file; " +
                           Expected(expected) + " is expected here: write one " +
                           std::string(HowToWrite(expected)));
  }
  return status.WithContext(path);
}

}  // namespace pipeplan::app
