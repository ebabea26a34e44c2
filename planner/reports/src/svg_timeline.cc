#include "pipeplan/reports/svg_timeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

// Layout in pixels. The time axis starts at kLeft and is options.width wide.
constexpr double kLeft = 64;         // rank labels
constexpr double kRight = 32;        // room for the last tick label
constexpr double kTopPad = 10;       // above the first row without a title
constexpr double kTitleHeight = 34;  // above the first row with a title
constexpr double kRowGap = 6;        // between ranks
constexpr double kCommLane = 7;      // comm marks under a row (only if the plan has comm)
constexpr double kSendBar = 2;       // SEND in flight: upper strip of the comm lane
constexpr double kRecvBar = 3;       // RECV waiting: lower strip of the comm lane
constexpr double kAxisHeight = 30;   // axis line, ticks and tick labels
constexpr double kLegendLine = 20;
constexpr double kTickSpacing = 100;  // target pixels between ticks
constexpr double kTextWidth = 0.62;   // average glyph width per font pixel, for fit checks
constexpr std::string_view kTextColor = "#1a1a1a";

// How a compute-track action is painted. Post-validation runs on the compute stream.
enum class Paint : uint8_t { kForward, kBackward, kInput, kWeight, kOverlap, kPostValidation };
constexpr size_t kNumPaints = 6;

struct PaintStyle {
  std::string_view css_class;  // names the group, so tools and tests can find a kind's boxes
  std::string_view fill;
  std::string_view legend;
};

constexpr std::array<PaintStyle, kNumPaints> kPaintStyles = {{
    {"pp-F", "#6fa8dc", "F forward"},
    {"pp-B", "#f6b26b", "B backward"},
    {"pp-I", "#76c7c0", "I input grad"},
    {"pp-W", "#93c47d", "W weight grad"},
    {"pp-OVERLAP", "#b4a7d6", "F&B overlap (top F, bottom B)"},
    {"pp-PV", "#b7b7b7", "PV post-validation"},
}};
constexpr std::string_view kOverlapBackwardFill = "#8e7cc3";  // lower half of an overlap cell

std::optional<Paint> PaintOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return Paint::kForward;
    case ActionKind::kBackward:
      return Paint::kBackward;
    case ActionKind::kBackwardInput:
      return Paint::kInput;
    case ActionKind::kBackwardWeight:
      return Paint::kWeight;
    case ActionKind::kOverlapFB:
      return Paint::kOverlap;
    case ActionKind::kPostValidation:
      return Paint::kPostValidation;
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      return std::nullopt;
  }
  return std::nullopt;
}

// Comm marks: colour by what travels, strip by direction.
// A rollback receive (post-validation) gets its own red mark: it must be drained on failure.
enum class Flow : uint8_t { kActivation, kGradient, kValidation, kRollback };
constexpr size_t kNumFlows = 4;
constexpr std::array<std::string_view, kNumFlows> kFlowFills = {"#3d85c6", "#e69138", "#666666",
                                                                "#cc0000"};
constexpr std::array<std::string_view, kNumFlows> kFlowLegends = {
    "activation comm", "gradient comm", "PV comm", "rollback RECV (drained if PV fails)"};

struct CommMark {
  Flow flow;
  bool is_send;
};

std::optional<CommMark> CommMarkOf(const Action& action) {
  switch (action.kind) {
    case ActionKind::kSendForward:
      return CommMark{Flow::kActivation, true};
    case ActionKind::kRecvForward:
      return CommMark{action.rollback ? Flow::kRollback : Flow::kActivation, false};
    case ActionKind::kSendBackward:
      return CommMark{Flow::kGradient, true};
    case ActionKind::kRecvBackward:
      return CommMark{Flow::kGradient, false};
    case ActionKind::kSendPostValidation:
      return CommMark{Flow::kValidation, true};
    case ActionKind::kRecvPostValidation:
      return CommMark{Flow::kValidation, false};
    case ActionKind::kForward:
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
    case ActionKind::kPostValidation:
      return std::nullopt;
  }
  return std::nullopt;
}

// Pixel coordinates rounded to 1/100 px keep the file small and the output stable.
std::string Px(double value) { return FormatNumber(std::round(value * 100) / 100); }
// Times in tooltips, to 1/1000 of the user's unit.
std::string Time(double value) { return FormatNumber(std::round(value * 1000) / 1000); }

// Time range and the time -> x mapping.
struct Scale {
  double t0 = 0;
  double t1 = 1;
  double x0 = kLeft;
  double px_per_unit = 1;

  double X(double t) const { return x0 + (t - t0) * px_per_unit; }
};

Scale MakeScale(const Plan& plan, const Timeline& timeline, double width, double time_end) {
  // The axis starts at 0 (step start) unless something ran earlier.
  double t0 = 0;
  double t1 = std::isfinite(timeline.metrics.makespan) ? timeline.metrics.makespan : 0;
  if (std::isfinite(time_end)) t1 = std::max(t1, time_end);
  const size_t num_ranks = std::min(plan.programs.size(), timeline.ranks.size());
  for (size_t r = 0; r < num_ranks; ++r) {
    for (const ActionTiming& timing : timeline.ranks[r].actions) {
      if (std::isfinite(timing.start)) t0 = std::min(t0, timing.start);
      if (std::isfinite(timing.end)) t1 = std::max(t1, timing.end);
    }
  }
  if (!(t1 > t0)) t1 = t0 + 1;
  Scale scale;
  scale.t0 = t0;
  scale.t1 = t1;
  scale.px_per_unit = width / (t1 - t0);
  return scale;
}

// A tick step of 1, 2 or 5 times a power of ten, and the decimals its labels need.
struct TickStep {
  double step = 1;
  int decimals = 0;
};

TickStep NiceTickStep(double raw) {
  // Powers of ten by repeated multiplication: exact for the usual ranges, no libm differences.
  double magnitude = 1;
  int exponent = 0;
  while (magnitude * 10 <= raw && exponent < 300) {
    magnitude *= 10;
    ++exponent;
  }
  while (magnitude > raw && exponent > -12) {
    magnitude /= 10;
    --exponent;
  }
  TickStep tick;
  if (raw <= magnitude) {
    tick.step = magnitude;
  } else if (raw <= 2 * magnitude) {
    tick.step = 2 * magnitude;
  } else if (raw <= 5 * magnitude) {
    tick.step = 5 * magnitude;
  } else {
    tick.step = 10 * magnitude;
    ++exponent;
  }
  tick.decimals = std::max(0, -exponent);
  return tick;
}

int ClampInt(int value, int low, int high) { return std::max(low, std::min(value, high)); }

// Everything the drawing functions share.
struct Layout {
  Scale scale;
  double width = 0;  // time axis pixels
  double row_height = 0;
  double row_pitch = 0;
  double top = 0;  // y of rank 0's row
  double axis_y = 0;
  double legend_y = 0;
  double total_width = 0;
  double total_height = 0;
  int num_ranks = 0;
  int font = 12;       // cell labels
  int half_font = 10;  // labels in overlap halves

  double RowY(size_t rank) const { return top + static_cast<double>(rank) * row_pitch; }
};

// The paints and comm flows a plan uses, for the legend.
struct Presence {
  std::array<bool, kNumPaints> paints = {};
  std::array<bool, kNumFlows> flows = {};
  bool discarded = false;  // first runs a failed post-validation replaced (measured)
};

// The fill of a discarded run: grey hatching, defined once in the SVG's <defs>.
constexpr std::string_view kDiscardedFill = "url(#pp-hatch)";

Presence FindPresence(const Plan& plan, const Timeline& timeline) {
  Presence presence;
  for (const RankTimeline& rank : timeline.ranks) {
    presence.discarded = presence.discarded || !rank.discarded.empty();
  }
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      if (const std::optional<Paint> paint = PaintOf(action.kind)) {
        presence.paints[static_cast<size_t>(*paint)] = true;
      } else if (const std::optional<CommMark> mark = CommMarkOf(action)) {
        presence.flows[static_cast<size_t>(mark->flow)] = true;
      }
    }
  }
  return presence;
}

bool HasAnyFlow(const Presence& presence) {
  return std::any_of(presence.flows.begin(), presence.flows.end(), [](bool b) { return b; });
}

struct LegendItem {
  std::string_view fill;
  std::string_view text;
  bool thin = false;  // comm: drawn as a bar, not a square
};

std::vector<LegendItem> LegendItems(const Presence& presence) {
  std::vector<LegendItem> items;
  for (size_t p = 0; p < kNumPaints; ++p) {
    if (presence.paints[p]) items.push_back({kPaintStyles[p].fill, kPaintStyles[p].legend});
  }
  for (size_t f = 0; f < kNumFlows; ++f) {
    if (presence.flows[f]) items.push_back({kFlowFills[f], kFlowLegends[f], true});
  }
  if (presence.discarded) {
    items.push_back({kDiscardedFill, "discarded: ran on weights a failed post-validation undid"});
  }
  if (HasAnyFlow(presence)) {
    items.push_back({"", "under each row: send in flight (upper), recv waiting (lower)"});
  }
  return items;
}

double LegendItemWidth(const LegendItem& item) {
  const double swatch = item.fill.empty() ? 0 : 18;
  // 12 px legend text runs about 6.6 px per character in Helvetica/Arial.
  return swatch + static_cast<double>(item.text.size()) * 6.6 + 22;
}

// Lines the legend wraps into at the given width.
int LegendLines(const std::vector<LegendItem>& items, double width) {
  if (items.empty()) return 0;
  int lines = 1;
  double x = 0;
  for (const LegendItem& item : items) {
    const double w = LegendItemWidth(item);
    if (x > 0 && x + w > width) {
      ++lines;
      x = 0;
    }
    x += w;
  }
  return lines;
}

Layout MakeLayout(const Plan& plan, const Timeline& timeline, const SvgOptions& options,
                  const std::vector<LegendItem>& legend, bool has_comm) {
  Layout layout;
  layout.width = std::max(100, options.width);
  layout.row_height = std::max(8, options.row_height);
  layout.scale = MakeScale(plan, timeline, layout.width, options.time_end);
  layout.num_ranks = static_cast<int>(plan.programs.size());
  layout.row_pitch = layout.row_height + (has_comm ? kCommLane : 0) + kRowGap;
  layout.top = options.title.empty() ? kTopPad : kTitleHeight;
  layout.axis_y = layout.top + layout.num_ranks * layout.row_pitch - kRowGap + 4;
  layout.legend_y = layout.axis_y + kAxisHeight;
  layout.total_width = kLeft + layout.width + kRight;
  layout.total_height = layout.legend_y + LegendLines(legend, layout.width) * kLegendLine + 4;
  layout.font = ClampInt(static_cast<int>(layout.row_height * 0.45), 7, 13);
  layout.half_font = ClampInt(static_cast<int>(layout.row_height * 0.5 * 0.8), 6, layout.font);
  return layout;
}

const ActionTiming* TimingOf(const Timeline& timeline, size_t rank, size_t index) {
  if (rank >= timeline.ranks.size()) return nullptr;
  const std::vector<ActionTiming>& actions = timeline.ranks[rank].actions;
  return index < actions.size() ? &actions[index] : nullptr;
}

// Average compute cell width decides the white separator: thin cells would drown in it.
std::string_view SeparatorWidth(const Plan& plan, const Timeline& timeline, const Scale& scale) {
  double total = 0;
  size_t count = 0;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionTiming* timing = TimingOf(timeline, r, i);
      if (timing == nullptr || !PaintOf(actions[i].kind)) continue;
      total += (timing->end - timing->start) * scale.px_per_unit;
      ++count;
    }
  }
  const double average = count == 0 ? 0 : total / static_cast<double>(count);
  if (average >= 8) return "1";
  if (average >= 3) return "0.5";
  return "0";
}

void AppendRect(std::string& out, double x, double y, double w, double h) {
  out += "<rect x=\"";
  out += Px(x);
  out += "\" y=\"";
  out += Px(y);
  out += "\" width=\"";
  out += Px(w);
  out += "\" height=\"";
  out += Px(h);
  out += '"';
}

void AppendText(std::string& out, double x, double y, std::string_view text) {
  out += "<text x=\"";
  out += Px(x);
  out += "\" y=\"";
  out += Px(y);
  out += "\">";
  out += text;
  out += "</text>\n";
}

// Appends a centred label if its estimated width fits the box.
void AppendLabelIfFits(std::string& out, double x, double y, double w, double h, int font,
                       std::string_view text) {
  const double text_width = static_cast<double>(text.size()) * font * kTextWidth + 2;
  if (text_width > w || font + 1 > h) return;
  // Baseline a third of the font below the centre approximates vertical centring without
  // dominant-baseline, which some renderers ignore.
  AppendText(out, x + w / 2, y + h / 2 + font * 0.35, text);
}

std::string CellLabel(const Action& action) {
  if (action.kind == ActionKind::kPostValidation) return "PV";
  return std::to_string(action.microbatch.value);
}

// The compute-track boxes, one group per paint so each fill is written once. Overlap cells are
// one box (upper colour, F part) with a darker lower half (B part) drawn over it.
struct CellOutput {
  std::array<std::string, kNumPaints> cells;  // rects with tooltips, by paint
  std::string overlap_lower;                  // lower halves of overlap cells
  std::string labels;
  std::string half_labels;
};

void DrawCell(const Action& action, const ActionTiming& timing, Paint paint, double y,
              const Layout& layout, bool show_labels, CellOutput& out) {
  const double x = layout.scale.X(timing.start);
  double w = std::max(0.0, (timing.end - timing.start) * layout.scale.px_per_unit);
  // PV takes no modelled time; draw it as a thin bar so it can be seen and hovered.
  if (paint == Paint::kPostValidation) w = std::max(w, 3.0);
  const double h = layout.row_height;
  std::string& cells = out.cells[static_cast<size_t>(paint)];
  AppendRect(cells, x, y, w, h);
  cells += "><title>";
  cells += XmlEscape(ToString(action));
  cells += " [";
  cells += Time(timing.start);
  cells += ", ";
  cells += Time(timing.end);
  cells += "]</title></rect>\n";

  if (paint != Paint::kOverlap) {
    if (show_labels) AppendLabelIfFits(out.labels, x, y, w, h, layout.font, CellLabel(action));
    return;
  }
  const double half = h / 2;
  AppendRect(out.overlap_lower, x, y + half, w, half);
  out.overlap_lower += "/>\n";
  if (show_labels && action.sub_actions.size() == 2) {
    AppendLabelIfFits(out.half_labels, x, y, w, half, layout.half_font,
                      CellLabel(action.sub_actions[0]));
    AppendLabelIfFits(out.half_labels, x, y + half, w, half, layout.half_font,
                      CellLabel(action.sub_actions[1]));
  }
}

// Appends "M x y h w v h h -w z" for one comm mark to a path.
void AppendPathBox(std::string& path, double x, double y, double w, double h) {
  path += 'M';
  path += Px(x);
  path += ' ';
  path += Px(y);
  path += 'h';
  path += Px(w);
  path += 'v';
  path += Px(h);
  path += 'h';
  path += Px(-w);
  path += 'z';
}

// Comm marks of all ranks as one path per flow: tens of thousands of them stay small this way.
void DrawCommMark(const CommMark& mark, const ActionTiming& timing, double row_y,
                  const Layout& layout, std::array<std::string, kNumFlows>& paths) {
  const double x = layout.scale.X(timing.start);
  double w = (timing.end - timing.start) * layout.scale.px_per_unit;
  const double lane_y = row_y + layout.row_height + 1;
  std::string& path = paths[static_cast<size_t>(mark.flow)];
  if (mark.is_send) {
    // A send is worth seeing even when instantaneous: at least one pixel wide.
    AppendPathBox(path, x, lane_y, std::max(w, 1.0), kSendBar);
    return;
  }
  // A recv that never waited has nothing to show, unless it is a rollback receive.
  if (mark.flow == Flow::kRollback) w = std::max(w, 2.0);
  if (!(w > 0)) return;
  AppendPathBox(path, x, lane_y + kSendBar + 1, w, kRecvBar);
}

void AppendGroup(std::string& out, std::string_view attributes, const std::string& body) {
  if (body.empty()) return;
  out += "<g ";
  out += attributes;
  out += ">\n";
  out += body;
  out += "</g>\n";
}

std::string FillAttributes(std::string_view css_class, std::string_view fill,
                           std::string_view stroke_width) {
  std::string attributes = "class=\"";
  attributes += css_class;
  attributes += "\" fill=\"";
  attributes += fill;
  attributes += '"';
  if (stroke_width == "0") {
    // Cells of a pixel or two: anti-aliased seams would stripe them with the background.
    attributes += " shape-rendering=\"crispEdges\"";
  } else {
    attributes += " stroke=\"#fff\" stroke-width=\"";
    attributes += stroke_width;
    attributes += '"';
  }
  return attributes;
}

std::string LabelAttributes(std::string_view css_class, int font) {
  std::string attributes = "class=\"";
  attributes += css_class;
  attributes += "\" font-size=\"" + std::to_string(font);
  attributes += "\" text-anchor=\"middle\" fill=\"";
  attributes += kTextColor;
  attributes += "\" pointer-events=\"none\"";
  return attributes;
}

void DrawActions(const Plan& plan, const Timeline& timeline, const Layout& layout,
                 const SvgOptions& options, std::string& svg) {
  CellOutput cells;
  std::array<std::string, kNumFlows> comm_paths;
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    const double row_y = layout.RowY(r);
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionTiming* timing = TimingOf(timeline, r, i);
      if (timing == nullptr) break;
      // A broken measurement must not put "nan" into the coordinates; skip the box.
      if (!std::isfinite(timing->start) || !std::isfinite(timing->end)) continue;
      if (const std::optional<Paint> paint = PaintOf(actions[i].kind)) {
        DrawCell(actions[i], *timing, *paint, row_y, layout, options.show_labels, cells);
      } else if (const std::optional<CommMark> mark = CommMarkOf(actions[i])) {
        DrawCommMark(*mark, *timing, row_y, layout, comm_paths);
      }
    }
  }

  // First runs a failed post-validation replaced: compute only (their transfers were drained
  // or sent again, which the replay's own marks show).
  std::string discarded;
  for (size_t r = 0; r < plan.programs.size() && r < timeline.ranks.size(); ++r) {
    const std::vector<Action>& actions = plan.programs[r].actions;
    for (const DiscardedRun& run : timeline.ranks[r].discarded) {
      if (run.action_index >= actions.size() || !PaintOf(actions[run.action_index].kind)) continue;
      if (!std::isfinite(run.timing.start) || !std::isfinite(run.timing.end)) continue;
      const double x = layout.scale.X(run.timing.start);
      const double w =
          std::max(0.0, (run.timing.end - run.timing.start) * layout.scale.px_per_unit);
      AppendRect(discarded, x, layout.RowY(r), w, layout.row_height);
      discarded += "><title>";
      discarded += XmlEscape(ToString(actions[run.action_index]));
      discarded += " [";
      discarded += Time(run.timing.start);
      discarded += ", ";
      discarded += Time(run.timing.end);
      discarded +=
          "] discarded: a failed post-validation undid its weights; run again</title></rect>\n";
    }
  }
  AppendGroup(svg,
              "class=\"pp-discarded\" fill=\"" + std::string(kDiscardedFill) +
                  "\" stroke=\"#999\" stroke-width=\"0.5\"",
              discarded);

  const std::string_view stroke = SeparatorWidth(plan, timeline, layout.scale);
  for (size_t p = 0; p < kNumPaints; ++p) {
    AppendGroup(svg, FillAttributes(kPaintStyles[p].css_class, kPaintStyles[p].fill, stroke),
                cells.cells[p]);
  }
  // The lower halves carry no tooltip; let the pointer reach the cell underneath.
  AppendGroup(
      svg,
      FillAttributes("pp-OVERLAP-B", kOverlapBackwardFill, stroke) + " pointer-events=\"none\"",
      cells.overlap_lower);
  for (size_t f = 0; f < kNumFlows; ++f) {
    if (comm_paths[f].empty()) continue;
    svg += "<path class=\"pp-comm\" fill=\"";
    svg += kFlowFills[f];
    svg += "\" d=\"";
    svg += comm_paths[f];
    svg += "\"/>\n";
  }
  AppendGroup(svg, LabelAttributes("pp-labels", layout.font), cells.labels);
  AppendGroup(svg, LabelAttributes("pp-half-labels", layout.half_font), cells.half_labels);
}

// Row bands make idle time (the bubbles) visible as bare background.
void DrawRows(const Layout& layout, std::string& svg) {
  std::string bands;
  std::string labels;
  for (int r = 0; r < layout.num_ranks; ++r) {
    const double y = layout.RowY(static_cast<size_t>(r));
    AppendRect(bands, layout.scale.x0, y, layout.width, layout.row_height);
    bands += "/>\n";
    AppendText(labels, kLeft - 8, y + layout.row_height / 2 + 4, "rank " + std::to_string(r));
  }
  AppendGroup(svg, "class=\"pp-rows\" fill=\"#f1f1f1\"", bands);
  AppendGroup(svg, "class=\"pp-ranks\" font-size=\"12\" text-anchor=\"end\" fill=\"#333\"", labels);
}

void AppendLine(std::string& out, double x1, double y1, double x2, double y2) {
  out += "<line x1=\"";
  out += Px(x1);
  out += "\" y1=\"";
  out += Px(y1);
  out += "\" x2=\"";
  out += Px(x2);
  out += "\" y2=\"";
  out += Px(y2);
  out += "\"/>\n";
}

// Grid lines behind the rows and tick labels under them.
void DrawAxis(const Layout& layout, std::string& svg) {
  const Scale& scale = layout.scale;
  std::string axis;
  AppendLine(axis, scale.x0, layout.axis_y, scale.x0 + layout.width, layout.axis_y);

  std::string grid;
  std::string labels;
  const double span = scale.t1 - scale.t0;
  const int max_ticks = std::max(2, static_cast<int>(layout.width / kTickSpacing));
  if (std::isfinite(span)) {  // an absurd range gets an axis without ticks
    const TickStep tick = NiceTickStep(span / max_ticks);
    const auto first = static_cast<long long>(std::ceil(scale.t0 / tick.step - 1e-9));
    const auto last = static_cast<long long>(std::floor(scale.t1 / tick.step + 1e-9));
    for (long long k = first; k <= last && k - first <= 4LL * max_ticks; ++k) {
      const double t = static_cast<double>(k) * tick.step;
      const double x = scale.X(t);
      AppendLine(grid, x, layout.top, x, layout.axis_y);
      AppendLine(axis, x, layout.axis_y, x, layout.axis_y + 5);
      AppendText(labels, x, layout.axis_y + 18, FormatFixed(t, tick.decimals));
    }
  }
  AppendGroup(svg, "class=\"pp-grid\" stroke=\"#dcdcdc\" stroke-width=\"1\"", grid);
  AppendGroup(svg, "class=\"pp-axis\" stroke=\"#555\" stroke-width=\"1\"", axis);
  AppendGroup(svg, "class=\"pp-ticks\" font-size=\"11\" text-anchor=\"middle\" fill=\"#333\"",
              labels);
}

void DrawLegend(const std::vector<LegendItem>& items, const Layout& layout, std::string& svg) {
  std::string body;
  double x = 0;
  double y = layout.legend_y;
  for (const LegendItem& item : items) {
    const double w = LegendItemWidth(item);
    if (x > 0 && x + w > layout.width) {
      x = 0;
      y += kLegendLine;
    }
    double text_x = kLeft + x;
    if (!item.fill.empty()) {
      const double bar = item.thin ? 4 : 12;
      AppendRect(body, text_x, y + 6 - bar / 2, 12, bar);
      body += " fill=\"";
      body += item.fill;
      body += "\"/>\n";
      text_x += 18;
    }
    AppendText(body, text_x, y + 10, XmlEscape(item.text));
    x += w;
  }
  AppendGroup(svg, "class=\"pp-legend\" font-size=\"12\" fill=\"#333\"", body);
}

void DrawTitle(const SvgOptions& options, std::string& svg) {
  if (options.title.empty()) return;
  svg += "<text class=\"pp-title\" x=\"";
  svg += Px(kLeft);
  svg += "\" y=\"22\" font-size=\"16\" font-weight=\"bold\" fill=\"#111\">";
  svg += XmlEscape(options.title);
  svg += "</text>\n";
}

}  // namespace

std::string RenderSvgTimeline(const Plan& plan, const Timeline& timeline,
                              const SvgOptions& options) {
  const Presence presence = FindPresence(plan, timeline);
  const std::vector<LegendItem> legend = LegendItems(presence);
  const Layout layout = MakeLayout(plan, timeline, options, legend, HasAnyFlow(presence));

  std::string svg;
  size_t num_actions = 0;
  for (const RankProgram& program : plan.programs) num_actions += program.actions.size();
  svg.reserve(4096 + 100 * num_actions);  // about a tooltip box or a comm mark per action
  const std::string w = Px(layout.total_width);
  const std::string h = Px(layout.total_height);
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"Helvetica, Arial, sans-serif\" class=\"pp-timeline\">\n";
  if (!options.title.empty()) svg += "<title>" + XmlEscape(options.title) + "</title>\n";
  svg += "<rect class=\"pp-bg\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  if (presence.discarded) {
    svg +=
        "<defs><pattern id=\"pp-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
        "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e4e4e4\"/>"
        "<rect width=\"2\" height=\"6\" fill=\"#9a9a9a\"/></pattern></defs>\n";
  }
  DrawTitle(options, svg);
  DrawRows(layout, svg);
  DrawAxis(layout, svg);
  DrawActions(plan, timeline, layout, options, svg);
  DrawLegend(legend, layout, svg);
  svg += "</svg>\n";
  return svg;
}

}  // namespace pipeplan
