// Message-generic reading and writing of pipeplan.v1 files: binary, text and JSON, format
// detection, UTF-8 and negative-zero hygiene, error positions.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto_convert.h"
#include "utf8.h"

namespace pipeplan {

namespace pb = ::google::protobuf;

namespace proto_convert {

std::string Child(const std::string& parent, std::string_view field) {
  if (parent.empty()) return std::string(field);
  return parent + "." + std::string(field);
}

std::string Element(const std::string& path, int index) {
  return path + "[" + std::to_string(index) + "]";
}

Status FieldError(const std::string& path, const std::string& message) {
  return InvalidArgument(path + ": " + message);
}

Status CheckAtLeast(int value, int minimum, const std::string& path, std::string_view note) {
  if (value >= minimum) return Status::Ok();
  return FieldError(path, "must be >= " + std::to_string(minimum) + std::string(note) + ", got " +
                              std::to_string(value));
}

Status CheckIndex(int value, int bound, const std::string& path) {
  PIPEPLAN_RETURN_IF_ERROR(CheckAtLeast(value, 0, path));
  if (value < bound) return Status::Ok();
  return FieldError(
      path, "out of range 0.." + std::to_string(bound - 1) + ", got " + std::to_string(value));
}

v1::FileKind ToProto(FileKind kind) { return kFileKinds.ToProto(kind); }

namespace {

std::string_view MessageOf(const pb::util::Status& status) {
  return {status.message().data(), status.message().size()};
}

// Whether a message of `type`, or one nested in it, has a field `is_wanted` accepts. `visiting`
// breaks the schema's cycles (an action's sub-actions are actions).
bool MayHold(const pb::Descriptor* type, bool (*is_wanted)(const pb::FieldDescriptor*),
             std::vector<const pb::Descriptor*>& visiting) {
  if (std::find(visiting.begin(), visiting.end(), type) != visiting.end()) return false;
  visiting.push_back(type);
  bool found = false;
  for (int i = 0; i < type->field_count() && !found; ++i) {
    const pb::FieldDescriptor* field = type->field(i);
    found = is_wanted(field) || (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
                                 MayHold(field->message_type(), is_wanted, visiting));
  }
  visiting.pop_back();
  return found;
}

bool IsString(const pb::FieldDescriptor* field) {
  return field->type() == pb::FieldDescriptor::TYPE_STRING;
}

bool IsDouble(const pb::FieldDescriptor* field) {
  return field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE;
}

bool MayHoldStrings(const pb::Descriptor* type) {
  std::vector<const pb::Descriptor*> visiting;
  return MayHold(type, IsString, visiting);
}

bool MayHoldDoubles(const pb::Descriptor* type) {
  std::vector<const pb::Descriptor*> visiting;
  return MayHold(type, IsDouble, visiting);
}

// The path of the first string field that is not UTF-8 ("provenance.options"), if any. Only
// message types that can hold a string are walked, so the actions of a plan are skipped.
std::optional<std::string> FindInvalidUtf8(const pb::Message& message, const std::string& path) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string name = Child(path, field->name());
    if (field->type() == pb::FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      if (!field->is_repeated()) {
        if (!IsValidUtf8(reflection->GetStringReference(message, field, &scratch))) return name;
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (!IsValidUtf8(reflection->GetRepeatedStringReference(message, field, i, &scratch))) {
          return Element(name, i);
        }
      }
      continue;
    }
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
        !MayHoldStrings(field->message_type())) {
      continue;
    }
    if (!field->is_repeated()) {
      if (auto found = FindInvalidUtf8(reflection->GetMessage(message, field), name)) return found;
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      const pb::Message& element = reflection->GetRepeatedMessage(message, field, i);
      if (auto found = FindInvalidUtf8(element, Element(name, i))) return found;
    }
  }
  return std::nullopt;
}

bool IsNegativeZero(double value) { return value == 0.0 && std::signbit(value); }

// JSON has one zero ("-0" reads back as 0), so a -0.0 read from a binary or text file would
// not survive being written as JSON and read again: every double read is made +0.0 instead
// (found by the request_file fuzzer).
void ClearNegativeZeros(pb::Message& message) {
  const pb::Reflection* reflection = message.GetReflection();
  const pb::Descriptor* type = message.GetDescriptor();
  for (int f = 0; f < type->field_count(); ++f) {
    const pb::FieldDescriptor* field = type->field(f);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
      if (!field->is_repeated()) {
        if (IsNegativeZero(reflection->GetDouble(message, field))) {
          reflection->SetDouble(&message, field, 0.0);
        }
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        if (IsNegativeZero(reflection->GetRepeatedDouble(message, field, i))) {
          reflection->SetRepeatedDouble(&message, field, i, 0.0);
        }
      }
    } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
               MayHoldDoubles(field->message_type())) {
      if (!field->is_repeated()) {
        if (reflection->HasField(message, field)) {
          ClearNegativeZeros(*reflection->MutableMessage(&message, field));
        }
        continue;
      }
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        ClearNegativeZeros(*reflection->MutableRepeatedMessage(&message, field, i));
      }
    }
  }
}

// Text and JSON parsing do not check that strings are UTF-8 (binary parsing does), nor does
// serialising.
Status CheckUtf8(const pb::Message& message) {
  const std::optional<std::string> field = FindInvalidUtf8(message, "");
  if (!field.has_value()) return Status::Ok();
  return FieldError(*field, "not valid UTF-8 (protobuf strings must be UTF-8)");
}

}  // namespace

StatusOr<std::string> Serialize(const pb::Message& message, ProtoFormat format) {
  // A string that is not UTF-8 (a name given on the command line) would make a binary file
  // that cannot be read back.
  PIPEPLAN_RETURN_IF_ERROR(
      CheckUtf8(message).WithContext("cannot write " + message.GetDescriptor()->full_name()));
  const pb::LogSilencer silence_protobuf_logging;  // library code never prints
  std::string out;
  switch (format) {
    case ProtoFormat::kBinary: {
      pb::io::StringOutputStream stream(&out);
      pb::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);  // stays byte-stable if the schema gains maps
      if (!message.SerializeToCodedStream(&coded)) {
        return Internal("cannot serialise " + message.GetDescriptor()->full_name() +
                        " (over 2 GiB?)");
      }
      break;  // the coded stream flushes into `out` when it goes out of scope
    }
    case ProtoFormat::kText:
      if (!pb::TextFormat::PrintToString(message, &out)) {
        return Internal("cannot print " + message.GetDescriptor()->full_name() + " as text");
      }
      break;
    case ProtoFormat::kJson: {
      pb::util::JsonPrintOptions options;
      options.add_whitespace = true;
      options.always_print_primitive_fields = true;  // users see every field, zeros included
      options.preserve_proto_field_names = true;
      const auto status = pb::util::MessageToJsonString(message, &out, options);
      if (!status.ok()) return Internal("cannot print JSON: " + std::string(MessageOf(status)));
      break;
    }
  }
  return out;
}

namespace {

// Keeps the first error: later ones are usually consequences of it.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!message_.empty()) return;
    // protobuf counts from 0; editors count from 1.
    message_ = "line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) +
               ": " + message;
  }

  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// protobuf's JSON parser reports syntax errors as "<what>\n<up to 20 bytes either side>\n
// <spaces>^". Where that snippet occurs once in the input, it pins down the position, which we
// report like text-format errors; otherwise only the first line is kept.
std::string DescribeJsonError(std::string_view input, std::string_view message) {
  if (message.starts_with(": ")) message.remove_prefix(2);  // empty path, e.g. a root array
  const size_t first_break = message.find('\n');
  if (first_break == std::string_view::npos) return std::string(message);
  const std::string_view what = message.substr(0, first_break);
  const size_t last_break = message.rfind('\n');
  const std::string_view caret_line = message.substr(last_break + 1);
  const std::string_view snippet =
      last_break > first_break ? message.substr(first_break + 1, last_break - first_break - 1)
                               : std::string_view();
  const size_t caret = caret_line.find_first_not_of(' ');
  const bool well_formed = caret != std::string_view::npos && caret_line.substr(caret) == "^" &&
                           caret <= snippet.size() && !snippet.empty();
  if (!well_formed) return std::string(what);
  const size_t found = input.find(snippet);
  if (found == std::string_view::npos || input.find(snippet, found + 1) != std::string_view::npos) {
    return std::string(what);
  }
  const size_t offset = found + caret;
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (input[i] != '\n') continue;
    ++line;
    line_start = i + 1;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1) +
         ": " + std::string(what);
}

}  // namespace

Status ParseMessage(std::string_view data, ProtoFormat format, pb::Message* message) {
  // Library code never prints; protobuf would log invalid UTF-8 in binary input to stderr.
  const pb::LogSilencer silence_protobuf_logging;
  if (data.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument("input of " + std::to_string(data.size()) + " bytes is over 2 GiB");
  }
  const int size = static_cast<int>(data.size());
  switch (format) {
    case ProtoFormat::kBinary:
      if (message->ParseFromArray(data.data(), size)) {
        ClearNegativeZeros(*message);
        return Status::Ok();
      }
      return InvalidArgument("not a valid binary " + message->GetDescriptor()->full_name());
    case ProtoFormat::kText: {
      FirstErrorCollector errors;
      pb::TextFormat::Parser parser;
      parser.RecordErrorsTo(&errors);
      pb::io::ArrayInputStream stream(data.data(), size);
      if (parser.Parse(&stream, message)) {
        ClearNegativeZeros(*message);
        return CheckUtf8(*message);
      }
      if (errors.message().empty()) {
        return InvalidArgument("not a valid text-format " + message->GetDescriptor()->full_name());
      }
      return InvalidArgument(errors.message());
    }
    case ProtoFormat::kJson: {
      const auto status = pb::util::JsonStringToMessage(pb::StringPiece(data.data(), data.size()),
                                                        message, pb::util::JsonParseOptions());
      if (status.ok()) {
        ClearNegativeZeros(*message);
        return CheckUtf8(*message);
      }
      return InvalidArgument(DescribeJsonError(data, MessageOf(status)));
    }
  }
  return Internal("unknown proto format");
}

}  // namespace proto_convert

namespace {

bool EndsWithIgnoreCase(std::string_view text, std::string_view suffix) {
  if (text.size() < suffix.size()) return false;
  const std::string_view tail = text.substr(text.size() - suffix.size());
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(tail[i])) != suffix[i]) return false;
  }
  return true;
}

// Text format and JSON are printable; binary protos almost always hold a tag byte below 0x20
// (any varint field 1..3, for a start). Bytes >= 0x80 count as printable: UTF-8 in strings.
bool LooksLikeText(std::string_view content) {
  for (const char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r' && byte != '\f' &&
        byte != '\v') {
      return false;
    }
    if (byte == 0x7f) return false;
  }
  return true;
}

}  // namespace

ProtoFormat DetectProtoFormat(std::string_view path, std::string_view content) {
  for (const std::string_view suffix : {".pb", ".bin"}) {
    if (EndsWithIgnoreCase(path, suffix)) return ProtoFormat::kBinary;
  }
  for (const std::string_view suffix : {".textproto", ".txtpb", ".pbtxt"}) {
    if (EndsWithIgnoreCase(path, suffix)) return ProtoFormat::kText;
  }
  if (EndsWithIgnoreCase(path, ".json")) return ProtoFormat::kJson;
  if (!LooksLikeText(content)) return ProtoFormat::kBinary;
  const size_t first = content.find_first_not_of(" \t\r\n\f\v");
  if (first != std::string_view::npos && content[first] == '{') return ProtoFormat::kJson;
  return ProtoFormat::kText;
}

std::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kPlan:
      return "plan";
    case FileKind::kRequest:
      return "request";
    case FileKind::kCostModel:
      return "cost model";
    case FileKind::kTimeline:
      return "timeline";
    case FileKind::kProfile:
      return "profile";
    case FileKind::kLayerCosts:
      return "layer costs";
  }
  return "unknown";
}

StatusOr<FileHeader> ReadFileHeader(std::string_view data, ProtoFormat format) {
  // Parsed leniently: every other field of the file is unknown to FileHeader and skipped.
  const pb::LogSilencer silence_protobuf_logging;
  if (data.size() > static_cast<size_t>(INT_MAX)) {
    return InvalidArgument("input of " + std::to_string(data.size()) + " bytes is over 2 GiB");
  }
  v1::FileHeader header;
  bool parsed = false;
  switch (format) {
    case ProtoFormat::kBinary:
      parsed = header.ParseFromArray(data.data(), static_cast<int>(data.size()));
      break;
    case ProtoFormat::kText: {
      pb::TextFormat::Parser parser;
      parser.AllowUnknownField(true);
      proto_convert::FirstErrorCollector errors;  // kept out of the log
      parser.RecordErrorsTo(&errors);
      pb::io::ArrayInputStream stream(data.data(), static_cast<int>(data.size()));
      parsed = parser.Parse(&stream, &header);
      break;
    }
    case ProtoFormat::kJson: {
      pb::util::JsonParseOptions options;
      options.ignore_unknown_fields = true;
      parsed =
          pb::util::JsonStringToMessage(pb::StringPiece(data.data(), data.size()), &header, options)
              .ok();
      break;
    }
  }
  if (!parsed) return InvalidArgument("not a protobuf message");
  return proto_convert::HeaderOf(header);
}

Status proto_convert::CheckHeader(const FileHeader& header, ProtoFormat format, FileKind expected) {
  const std::string wanted = std::string(FileKindName(expected));
  if (header.format_version > kFileFormatVersion) {
    return InvalidArgument("written by a newer pipeplan (file format version " +
                           std::to_string(header.format_version) + "; this one reads up to " +
                           std::to_string(kFileFormatVersion) + ")");
  }
  if (header.kind.has_value() && *header.kind != expected) {
    return InvalidArgument("is a " + std::string(FileKindName(*header.kind)) + " file, not a " +
                           wanted + " file");
  }
  if (!header.kind.has_value() && format == ProtoFormat::kBinary) {
    return InvalidArgument("records no file kind, so it is not a " + wanted +
                           " file written by pipeplan (binary files from before file format "
                           "version 1 are not read: write them again)");
  }
  return Status::Ok();
}

Status CheckFileKind(std::string_view data, ProtoFormat format, FileKind expected) {
  const StatusOr<FileHeader> header = ReadFileHeader(data, format);
  if (!header.ok()) return Status::Ok();  // not protobuf at all: the full parse says where
  return proto_convert::CheckHeader(*header, format, expected);
}

}  // namespace pipeplan
