// UTF-8 validity, as protobuf requires of every string field: its binary parser rejects a
// string that is not UTF-8, while its text-format parser accepts one (escapes such as "\377"),
// so proto_io checks text and JSON input itself, or a file read as text could be written as a
// binary file that no longer reads back.
#pragma once

#include <string_view>

namespace pipeplan {

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
bool IsValidUtf8(std::string_view text);

}  // namespace pipeplan
