// Deterministic number formatting and escaping, shared by the exporters and the CLI: the same
// input always gives the same bytes.
#pragma once

#include <string>
#include <string_view>

namespace pipeplan {

// Shortest round-trip decimal form ("12.5", "1e+20"), with an exponent from 1e16 on (never a
// run of integer digits past 64 bits, which some JSON readers refuse); identical on every run
// and machine.
std::string FormatNumber(double value);
// Fixed number of decimals, for tables ("0.2431").
std::string FormatFixed(double value, int decimals);
// At most four decimals, trailing zeros dropped ("33", "0.5", "1234.5678"), for tables and
// the planner's notes.
std::string FormatCompact(double value);
// Bytes with a binary unit and three significant digits: "512 B", "1.50 KiB", "12.3 MiB",
// "70.0 GiB".
std::string FormatBytes(double bytes);
// Escapes for a JSON string body (no surrounding quotes).
std::string JsonEscape(std::string_view text);
// Escapes &, <, >, " and ' for HTML/SVG text and attributes; control characters other than
// tab, newline and carriage return (which XML cannot hold) become U+FFFD.
std::string XmlEscape(std::string_view text);

}  // namespace pipeplan
