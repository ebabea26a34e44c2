// simdjson on-demand helpers shared by the torch.profiler trace parser (torch_trace.cc) and
// its reader of pipeplan's metadata (trace_metadata.cc): errors that name where, numbers read
// as written.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <string>
#include <string_view>

#include "pipeplan/model/status.h"

namespace pipeplan::trace_json {

namespace od = simdjson::ondemand;

inline std::string ErrorText(simdjson::error_code error) { return simdjson::error_message(error); }

inline bool IsTruncation(simdjson::error_code error) {
  return error == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || error == simdjson::UNCLOSED_STRING;
}

inline Status JsonError(std::string_view where, simdjson::error_code error) {
  return InvalidArgument(std::string(where) + ": " + ErrorText(error) +
                         (IsTruncation(error) ? " (is the file truncated?)" : ""));
}

// A value's text as written, a view into the parser's buffer (no copy: every event has
// several numbers); read before the value is.
inline std::string_view Written(od::value& value) {
  std::string_view text = value.raw_json_token();
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' ||
                           text.back() == '\t' || text.back() == ',' || text.back() == '}')) {
    text.remove_suffix(1);
  }
  return text;
}

// The message quotes at most 40 characters of what was written.
inline Status NotANumber(std::string_view key, std::string_view written,
                         std::string_view expected) {
  return InvalidArgument(std::string(key) + " is " + std::string(written.substr(0, 40)) + ", not " +
                         std::string(expected));
}

// Numbers in traces are integers or decimals (an exponent allowed), finite.
inline StatusOr<double> NumberOf(std::string_view key, od::value value) {
  const std::string_view written = Written(value);
  double number = 0.0;
  if (value.get_double().get(number) || !std::isfinite(number)) {
    return NotANumber(key, written, "a finite number");
  }
  return number;
}

// Finite bytes >= 0, named `where`.
inline StatusOr<double> BytesOf(const std::string& where, od::value value) {
  PIPEPLAN_ASSIGN_OR_RETURN(const double bytes, NumberOf(where, value));
  if (bytes < 0) return NotANumber(where, Written(value), "bytes >= 0");
  return bytes;
}

}  // namespace pipeplan::trace_json
