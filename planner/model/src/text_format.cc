#include "pipeplan/model/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace pipeplan {

std::string FormatNumber(double value) {
  if (value == 0) return "0";  // also folds -0
  char buffer[64];
  // Past 1e16 the shortest form can be a run of integer digits ("221360928884514619392"),
  // which JSON readers that hold integers in 64 bits (simdjson) refuse: an exponent instead.
  const auto result =
      std::fabs(value) >= 1e16
          ? std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific)
          : std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string FormatFixed(double value, int decimals) {
  if (value == 0) value = 0;  // folds -0
  // Beyond 1e15 fixed notation is a column of digits nobody reads (and past the buffer it is no
  // text at all): the shortest form says the same in a few characters.
  if (!std::isfinite(value) || std::fabs(value) >= 1e15) return FormatNumber(value);
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed, decimals);
  if (result.ec != std::errc()) return FormatNumber(value);
  return std::string(buffer, result.ptr);
}

std::string FormatCompact(double value) {
  const double rounded = std::round(value * 1e4) / 1e4;
  if (!std::isfinite(rounded) || std::abs(rounded) >= 1e15) return FormatNumber(value);
  std::string text = FormatFixed(rounded, 4);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (std::fabs(bytes) >= 1024.0 && unit + 1 < std::size(kUnits)) {
    bytes /= 1024.0;
    ++unit;
  }
  if (unit == 0) return FormatFixed(bytes, 0) + " B";
  const int decimals = std::fabs(bytes) < 10.0 ? 2 : std::fabs(bytes) < 100.0 ? 1 : 0;
  return FormatFixed(bytes, decimals) + " " + kUnits[unit];
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\t':
      case '\n':
      case '\r':
        out += c;
        break;
      default:
        // XML has no way to write the other control characters, not even escaped: they
        // become U+FFFD, the replacement character.
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\xEF\xBF\xBD";
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace pipeplan
