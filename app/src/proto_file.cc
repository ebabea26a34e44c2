#include "pipeplan/app/proto_file.h"

#include <utility>

#include "pipeplan/app/files.h"
#include "pipeplan/formats/torch_csv.h"

namespace pipeplan::app {

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
  }
  return "";
}

StatusOr<ProtoFile> ReadProtoFile(const std::string& path, FileKind expected) {
  PIPEPLAN_ASSIGN_OR_RETURN(std::string content, ReadFile(path));
  const std::string wanted = "a " + std::string(FileKindName(expected)) + " file";
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
  const StatusOr<FileHeader> header = ReadFileHeader(content, format);
  if (header.ok() && header->kind.has_value() && *header->kind != expected) {
    return InvalidArgument(path + " is a " + std::string(FileKindName(*header->kind)) + " file; " +
                           wanted + " is expected here: write one " +
                           std::string(HowToWrite(expected)));
  }
  return ProtoFile{std::move(content), format};
}

}  // namespace pipeplan::app
