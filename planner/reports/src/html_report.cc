#include "pipeplan/reports/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/reports/svg_memory.h"
#include "pipeplan/reports/svg_timeline.h"

namespace pipeplan {
namespace {

// No external assets: the page must open offline and from a CI artifact.
constexpr std::string_view kStyle = R"css(
body { font: 14px/1.45 Helvetica, Arial, sans-serif; color: #1a1a1a; background: #fff;
       margin: 24px 32px; }
h1 { font-size: 24px; margin: 0 0 4px; }
.subtitle { color: #555; margin: 0 0 18px; }
div.table-wrap { overflow-x: auto; max-width: 100%; }
table.metrics { border-collapse: collapse; margin: 8px 0 14px; }
table.metrics th, table.metrics td { padding: 5px 12px; border-bottom: 1px solid #ddd;
                                     text-align: right; white-space: nowrap; }
table.metrics th { background: #f1f1f1; border-bottom: 2px solid #bbb; font-weight: 600;
                   vertical-align: bottom; }
table.metrics th:first-child, table.metrics td:first-child { text-align: left; }
table.metrics td { font-variant-numeric: tabular-nums; }
table.metrics tr.best td { background: #e3f2e6; font-weight: 600; }
table.metrics a { color: inherit; }
.badge { display: inline-block; margin-left: 8px; padding: 0 6px; border-radius: 8px;
         background: #2e7d32; color: #fff; font-size: 11px; font-weight: 600; }
.definitions { color: #444; font-size: 13px; max-width: 1000px; }
.definitions code { background: #f4f4f4; padding: 0 3px; }
section.plan { margin-top: 30px; }
section.plan h2 { font-size: 18px; margin: 0 0 2px; }
.meta { color: #666; font-size: 12px; margin: 0 0 8px; }
.timeline { overflow-x: auto; }
.timeline svg { display: block; max-width: 100%; height: auto; }
)css";

// Times and memory to 1/1000 of the user's unit, shortest form ("1234.5", "96").
std::string Amount(double value) {
  if (!std::isfinite(value)) return "-";
  return FormatNumber(std::round(value * 1000) / 1000);
}

// Ratios (bubble rates, gap) with four decimals, as the zero-bubble papers print them.
std::string Ratio(double value) {
  if (!std::isfinite(value)) return "-";
  return FormatFixed(value, 4);
}

std::string AnchorOf(size_t index) { return "plan-" + std::to_string(index); }

// Smallest makespan over the entries; every entry that reaches it is highlighted (ties stay ties).
double BestMakespan(const std::vector<ReportEntry>& entries) {
  double best = std::numeric_limits<double>::infinity();
  for (const ReportEntry& entry : entries) {
    const double makespan = entry.timeline.metrics.makespan;
    if (std::isfinite(makespan)) best = std::min(best, makespan);
  }
  return best;
}

void AppendCell(std::string& html, std::string_view text) {
  html += "<td>";
  html += text;
  html += "</td>";
}

void AppendHeader(const ReportOptions& options, std::string& html) {
  html += "<header>\n<h1>" + XmlEscape(options.title) + "</h1>\n";
  if (!options.subtitle.empty()) {
    html += "<p class=\"subtitle\">" + XmlEscape(options.subtitle) + "</p>\n";
  }
  html += "</header>\n";
}

void AppendTableRow(const ReportEntry& entry, size_t index, bool best, std::string& html) {
  const Topology& topology = entry.plan.request.topology;
  const Metrics& metrics = entry.timeline.metrics;
  html += best ? "<tr class=\"best\">" : "<tr>";
  std::string name = "<a href=\"#" + AnchorOf(index) + "\">" + XmlEscape(entry.name) + "</a>";
  if (best) name += "<span class=\"badge\">best</span>";
  AppendCell(html, name);
  AppendCell(html, std::to_string(topology.ranks));
  AppendCell(html, std::to_string(topology.stages_per_rank));
  AppendCell(html, std::to_string(topology.microbatches));
  AppendCell(html, Amount(metrics.makespan));
  AppendCell(html, Ratio(metrics.zb_bubble_rate));
  AppendCell(html, Ratio(metrics.bubble_fraction_max));
  AppendCell(html, Ratio(metrics.bubble_fraction_mean));
  AppendCell(html, Amount(metrics.lower_bound));
  AppendCell(html, Ratio(metrics.gap_to_lower_bound));
  AppendCell(html, Amount(PeakActivationMemory(entry.timeline)));
  html += "</tr>\n";
}

void AppendTable(const std::vector<ReportEntry>& entries, std::string& html) {
  // Wide tables scroll inside their own box rather than the page.
  html += "<div class=\"table-wrap\">\n";
  html +=
      "<table class=\"metrics\">\n<thead><tr><th>strategy</th><th>ranks P</th>"
      "<th>stages/rank V</th><th>microbatches M</th><th>makespan</th><th>zb bubble rate</th>"
      "<th>bubble fraction<br>max</th><th>bubble fraction<br>mean</th><th>lower bound</th>"
      "<th>gap to<br>lower bound</th><th>peak activation<br>memory (max rank)</th></tr></thead>\n"
      "<tbody>\n";
  const double best = BestMakespan(entries);
  for (size_t i = 0; i < entries.size(); ++i) {
    AppendTableRow(entries[i], i, entries[i].timeline.metrics.makespan == best, html);
  }
  html += "</tbody>\n</table>\n</div>\n";
}

void AppendDefinitions(std::string& html) {
  html +=
      "<p class=\"definitions\">Times are in the unit of the cost model. "
      "<code>bubble_fraction</code> = 1 - busy / makespan per rank (busy = compute time), "
      "shown as the max and the mean over ranks. "
      "<code>zb_bubble_rate</code> = (span - work) / span of the rank with the longest span, "
      "where span runs from the rank's first compute start to its last compute end "
      "(the zero-bubble papers' figure). "
      "<code>lower bound</code> = max(largest per-rank work, critical path of one microbatch); "
      "<code>gap to lower bound</code> = makespan / lower bound - 1. "
      "The highlighted row has the smallest makespan.</p>\n";
}

// One line on post-validation when the plan has it: where rollback applies.
void AppendPostValidation(const Plan& plan, std::string& html) {
  int validations = 0;
  for (const RankProgram& program : plan.programs) {
    for (const Action& action : program.actions) {
      validations += action.kind == ActionKind::kPostValidation ? 1 : 0;
    }
  }
  if (validations == 0) return;
  html +=
      "<p class=\"meta\">post-validation: PV on every rank (grey), the optimizer state "
      "travelling from the last rank to rank 0; " +
      std::to_string(CountRollbackReceives(plan)) +
      " receives tagged rollback (red marks): if validation fails they are still drained, "
      "then the step is replayed.</p>\n";
}

void AppendPlanSection(const ReportEntry& entry, size_t index, double time_end, std::string& html) {
  const Topology& topology = entry.plan.request.topology;
  html += "<section class=\"plan\" id=\"" + AnchorOf(index) + "\">\n";
  html += "<h2>" + XmlEscape(entry.name) + "</h2>\n";
  html += "<p class=\"meta\">strategy " + XmlEscape(entry.plan.request.strategy);
  if (!entry.plan.provenance.options.empty()) {
    html += " (" + XmlEscape(entry.plan.provenance.options) + ")";
  }
  html += " | P=" + std::to_string(topology.ranks) +
          " V=" + std::to_string(topology.stages_per_rank) +
          " M=" + std::to_string(topology.microbatches);
  html += " | placement ";
  html += PlacementName(topology.placement);
  html += " | ";
  html += TimelineSourceName(entry.timeline.source);
  html += " timeline, makespan " + Amount(entry.timeline.metrics.makespan) + "</p>\n";
  AppendPostValidation(entry.plan, html);
  // The <h2> already names the plan, so the SVG goes without its own title.
  html += "<div class=\"timeline\">\n";
  SvgOptions svg;
  svg.time_end = time_end;
  html += RenderSvgTimeline(entry.plan, entry.timeline, svg);
  html += "</div>\n</section>\n";
}

void AppendMemorySection(const std::vector<ReportEntry>& entries, double time_end,
                         std::string& html) {
  std::vector<MemoryCurves> curves;
  curves.reserve(entries.size());
  for (const ReportEntry& entry : entries) curves.push_back({entry.name, &entry.timeline});
  html += "<section class=\"plan\" id=\"memory\">\n<h2>Memory per rank</h2>\n";
  html +=
      "<p class=\"meta\">What each rank held over the step (static memory, activations "
      "and transients), one line per timeline, on the time axis above.</p>\n";
  html += "<div class=\"timeline\">\n";
  html += RenderSvgMemory(curves, SvgMemoryOptions{.time_end = time_end});
  html += "</div>\n</section>\n";
}

}  // namespace

std::string RenderHtmlReport(const std::vector<ReportEntry>& entries,
                             const ReportOptions& options) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  html += XmlEscape(options.title);
  html += "</title>\n<style>";
  html += kStyle;
  html += "</style>\n</head>\n<body>\n";
  AppendHeader(options, html);
  if (entries.empty()) {
    html += "<p>No plans to report.</p>\n";
  } else {
    AppendTable(entries, html);
    AppendDefinitions(html);
    double time_end = 0.0;
    for (const ReportEntry& entry : entries) {
      if (!options.shared_time_axis) break;
      for (const RankTimeline& rank : entry.timeline.ranks) {
        for (const ActionTiming& timing : rank.actions) {
          if (std::isfinite(timing.end)) time_end = std::max(time_end, timing.end);
        }
      }
    }
    for (size_t i = 0; i < entries.size(); ++i) AppendPlanSection(entries[i], i, time_end, html);
    if (options.memory_curves) AppendMemorySection(entries, time_end, html);
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace pipeplan
