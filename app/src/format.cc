#include "pipeplan/app/format.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace pipeplan::app {

std::string FormatPercent(double fraction) { return FormatFixed(fraction * 100.0, 1) + "%"; }

std::string JsonString(std::string_view text) { return "\"" + JsonEscape(text) + "\""; }

std::string JsonNumber(double value) { return std::isfinite(value) ? FormatNumber(value) : "null"; }

std::string JsonArray(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += JsonNumber(values[i]);
  }
  out += ']';
  return out;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> left_aligned)
    : header_(std::move(header)), left_aligned_(std::move(left_aligned)) {
  left_aligned_.resize(header_.size(), false);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back({std::move(cells), {}});
}

void TextTable::AddSpanRow(std::vector<std::string> cells, std::string tail) {
  cells.resize(std::min(cells.size(), header_.size()));
  rows_.push_back({std::move(cells), std::move(tail)});
}

std::string TextTable::Render() const {
  std::vector<size_t> widths(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) widths[c] = header_[c].size();
  for (const Row& row : rows_) {
    for (size_t c = 0; c < row.cells.size(); ++c) {
      widths[c] = std::max(widths[c], row.cells[c].size());
    }
  }
  auto render_row = [&](const std::vector<std::string>& cells, const std::string& tail) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(widths[c] - cells[c].size(), ' ');
      line += left_aligned_[c] ? cells[c] + pad : pad + cells[c];
    }
    if (!tail.empty()) line += "  " + tail;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out = render_row(header_, {});
  for (const Row& row : rows_) out += render_row(row.cells, row.tail);
  return out;
}

}  // namespace pipeplan::app
