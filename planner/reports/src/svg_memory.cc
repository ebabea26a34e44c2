#include "pipeplan/reports/svg_memory.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

// Layout in pixels; kLeft and kRight match svg_timeline so the axes line up.
constexpr double kLeft = 64;
constexpr double kRight = 32;
constexpr double kLabelHeight = 16;  // the rank's line of peaks, above its chart
constexpr double kGap = 10;          // between ranks
constexpr double kLegendHeight = 22;
constexpr std::array<std::string_view, 4> kColors = {"#1f5fa8", "#d0402b", "#2f8f3a", "#7b4fa8"};

std::string_view ColorOf(size_t curve) { return kColors[curve % kColors.size()]; }

std::string Amount(double value, MemoryUnit unit) {
  return unit == MemoryUnit::kBytes ? FormatBytes(value) : FormatNumber(value);
}

std::string Px(double value) { return FormatFixed(value, 1); }

const RankTimeline* RankOf(const MemoryCurves& curves, size_t rank) {
  if (curves.timeline == nullptr || rank >= curves.timeline->ranks.size()) return nullptr;
  return &curves.timeline->ranks[rank];
}

}  // namespace

std::string RenderSvgMemory(const std::vector<MemoryCurves>& curves,
                            const SvgMemoryOptions& options) {
  size_t ranks = 0;
  double time_end = options.time_end;
  for (const MemoryCurves& c : curves) {
    if (c.timeline == nullptr) continue;
    ranks = std::max(ranks, c.timeline->ranks.size());
    for (const RankTimeline& rank : c.timeline->ranks) {
      for (const MemorySample& sample : rank.memory) time_end = std::max(time_end, sample.time);
    }
  }
  if (time_end <= 0) time_end = 1;
  const double width = options.width;
  const double row = kLabelHeight + options.chart_height + kGap;
  const double height = static_cast<double>(ranks) * row + kLegendHeight;
  const auto x = [&](double t) { return kLeft + std::clamp(t / time_end, 0.0, 1.0) * width; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"pp-memory\" width=\"" +
                    Px(kLeft + width + kRight) + "\" height=\"" + Px(height) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  for (size_t r = 0; r < ranks; ++r) {
    const double top = static_cast<double>(r) * row;
    const double chart_top = top + kLabelHeight;
    const double bottom = chart_top + options.chart_height;
    double most = 0.0;
    std::string label = "rank " + std::to_string(r) + " peak:";
    for (size_t c = 0; c < curves.size(); ++c) {
      const RankTimeline* rank = RankOf(curves[c], r);
      if (rank == nullptr) continue;
      most = std::max(most, rank->peak_memory);
      for (const MemorySample& sample : rank->memory) most = std::max(most, sample.bytes);
      label += (c == 0 ? " " : ", ") + Amount(rank->peak_memory, rank->memory_unit) + " " +
               XmlEscape(curves[c].name);
    }
    if (most <= 0) most = 1;
    svg += "<text x=\"" + Px(kLeft) + "\" y=\"" + Px(top + kLabelHeight - 4) + "\">" + label +
           "</text>\n";
    svg += "<rect x=\"" + Px(kLeft) + "\" y=\"" + Px(chart_top) + "\" width=\"" + Px(width) +
           "\" height=\"" + Px(options.chart_height) + "\" fill=\"#fafafa\" stroke=\"#cccccc\"/>\n";
    for (size_t c = 0; c < curves.size(); ++c) {
      const RankTimeline* rank = RankOf(curves[c], r);
      if (rank == nullptr || rank->memory.empty()) continue;
      std::string points;
      for (const MemorySample& sample : rank->memory) {
        const double y = bottom - sample.bytes / most * options.chart_height;
        points += Px(x(sample.time)) + "," + Px(y) + " ";
      }
      svg += "<polyline class=\"pp-memory-curve\" data-rank=\"" + std::to_string(r) +
             "\" data-name=\"" + XmlEscape(curves[c].name) + "\" fill=\"none\" stroke=\"" +
             std::string(ColorOf(c)) + "\" stroke-width=\"1.5\" points=\"" + points + "\"/>\n";
    }
  }
  double legend_x = kLeft;
  const double legend_y = static_cast<double>(ranks) * row + 14;
  for (size_t c = 0; c < curves.size(); ++c) {
    svg += "<line x1=\"" + Px(legend_x) + "\" y1=\"" + Px(legend_y - 4) + "\" x2=\"" +
           Px(legend_x + 18) + "\" y2=\"" + Px(legend_y - 4) + "\" stroke=\"" +
           std::string(ColorOf(c)) + "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + Px(legend_x + 24) + "\" y=\"" + Px(legend_y) + "\">" +
           XmlEscape(curves[c].name) + "</text>\n";
    legend_x += 40 + 7.0 * static_cast<double>(curves[c].name.size());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace pipeplan
