// Text formatting for the CLI's output: deterministic numbers, JSON strings and aligned
// plain-text tables.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/text_format.h"

namespace pipeplan::app {

// Shortest round-trip decimals and fixed decimals come from the library, so the CLI and the
// exporters write numbers the same way.
using pipeplan::FormatCompact;
using pipeplan::FormatFixed;
using pipeplan::FormatNumber;
// Percentage with one decimal ("24.3%").
std::string FormatPercent(double fraction);
using ::pipeplan::FormatBytes;
using ::pipeplan::FormatMemory;
// A quoted, escaped JSON string.
std::string JsonString(std::string_view text);
// A JSON number; null for NaN and infinities, which JSON cannot express.
std::string JsonNumber(double value);
// "[1,2,3]" from numbers.
std::string JsonArray(const std::vector<double>& values);

// A plain-text table: the first row is the header; column c is left-aligned when
// left_aligned[c] is set, right-aligned otherwise; two spaces between columns.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> left_aligned = {});
  void AddRow(std::vector<std::string> cells);
  // A row whose first cells are aligned with the table and whose `tail` spans the remaining
  // columns (e.g. the reason a strategy failed instead of its numbers).
  void AddSpanRow(std::vector<std::string> cells, std::string tail);
  std::string Render() const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string tail;
  };
  std::vector<std::string> header_;
  std::vector<bool> left_aligned_;
  std::vector<Row> rows_;
};

}  // namespace pipeplan::app
