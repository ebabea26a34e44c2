// Fuzz target: what the commands write and print for a plan. The input is a plan file (any
// format, as 'simulate' reads one); a valid, small one is simulated and rendered as
// 'simulate --svg --html --trace --json' renders it, and as 'diff' and 'compare' draw their
// reports (two timelines on a shared axis with memory curves). Every text must hold no control
// byte but line breaks and tabs; the SVG timeline and memory chart must be well-formed XML
// (expat), the Chrome trace and the metrics JSON valid JSON (simdjson). The number formatting
// behind every table and report is fuzzed directly too: the input's first 8 bytes as a double,
// written by FormatFixed (0 to 6 decimals), FormatNumber, FormatBytes, FormatCompact and
// FormatPercent, must be a short number ("-12.5", "1e+300", "inf", "nan") and its unit.
#include <expat.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "pipeplan/app/format.h"
#include "pipeplan/app/metrics_json.h"
#include "pipeplan/app/plan_summary.h"
#include "pipeplan/checks/validator.h"
#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/text_format.h"
#include "pipeplan/reports/chrome_trace.h"
#include "pipeplan/reports/html_report.h"
#include "pipeplan/reports/svg_memory.h"
#include "pipeplan/reports/svg_timeline.h"

namespace {

using namespace pipeplan;

// Text for a terminal or a file viewer: no control byte but a line break or a tab (so no NUL).
void CheckPrintable(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    PIPEPLAN_FUZZ_CHECK(byte >= 0x20 || c == '\n' || c == '\t' || c == '\r');
  }
}

void CheckXml(std::string_view text) {
  CheckPrintable(text);
  PIPEPLAN_FUZZ_CHECK(text.size() < INT_MAX);
  XML_Parser parser = XML_ParserCreate(nullptr);
  PIPEPLAN_FUZZ_CHECK(parser != nullptr);
  const bool parsed =
      XML_Parse(parser, text.data(), static_cast<int>(text.size()), XML_TRUE) == XML_STATUS_OK;
  if (!parsed) {
    const std::string where = std::string(XML_ErrorString(XML_GetErrorCode(parser))) + " at line " +
                              std::to_string(XML_GetCurrentLineNumber(parser));
    fuzz::InvariantFailed("the SVG is well-formed XML", where, __FILE__, __LINE__);
  }
  XML_ParserFree(parser);
}

void CheckJson(std::string_view text) {
  CheckPrintable(text);
  PIPEPLAN_FUZZ_CHECK(fuzz::IsJson(text));
}

// A number as the tables write it: digits, '.', signs and an exponent, or (-)inf / (-)nan,
// then one of `units` when given; under 64 characters in all.
void CheckNumber(std::string_view text, std::initializer_list<std::string_view> units = {}) {
  PIPEPLAN_FUZZ_CHECK(!text.empty() && text.size() < 64);
  if (units.size() > 0) {
    bool has_unit = false;
    for (const std::string_view unit : units) {
      if (!has_unit && text.ends_with(unit)) {
        text.remove_suffix(unit.size());
        has_unit = true;
      }
    }
    PIPEPLAN_FUZZ_CHECK(has_unit);
  }
  std::string_view magnitude = text;
  if (magnitude.starts_with('-')) magnitude.remove_prefix(1);
  if (magnitude == "inf" || magnitude == "nan") return;
  PIPEPLAN_FUZZ_CHECK(!text.empty() &&
                      text.find_first_not_of("0123456789.+-e") == std::string_view::npos);
}

void CheckNumberFormats(const uint8_t* data, size_t size) {
  if (size < sizeof(double)) return;
  double value = 0;
  std::memcpy(&value, data, sizeof(value));
  for (int decimals = 0; decimals <= 6; ++decimals) CheckNumber(FormatFixed(value, decimals));
  CheckNumber(FormatNumber(value));
  CheckNumber(FormatBytes(value), {" B", " KiB", " MiB", " GiB", " TiB", " PiB"});
  CheckNumber(app::FormatCompact(value));
  CheckNumber(app::FormatPercent(value), {"%"});
}

// What 'simulate' writes: the SVG timeline, the HTML report, the Chrome trace, the JSON line.
void RenderAsSimulate(const Plan& plan, const Timeline& timeline) {
  const std::string name = app::PlanStrategyName(plan);
  SvgOptions svg;
  svg.title = name;
  CheckXml(RenderSvgTimeline(plan, timeline, svg));
  ReportOptions report;
  report.subtitle = name + ", plan.pb";
  const std::string post_validation = app::PostValidationLine(plan);
  CheckPrintable(post_validation);
  if (!post_validation.empty()) report.subtitle += "; " + post_validation;
  CheckPrintable(RenderHtmlReport({ReportEntry{name, plan, timeline}}, report));
  CheckJson(ExportChromeTrace(plan, timeline));
  CheckJson(app::RenderMetricsJson(plan, timeline));
}

// What 'diff' and 'compare' draw: timelines on one axis, memory curves below them.
void RenderAsComparison(const Plan& plan, const Timeline& timeline) {
  const double time_end = 2 * timeline.metrics.makespan;
  SvgOptions svg;
  svg.time_end = time_end;
  svg.show_labels = false;
  CheckXml(RenderSvgTimeline(plan, timeline, svg));
  CheckXml(RenderSvgMemory({{"simulated", &timeline}, {"measured", &timeline}},
                           SvgMemoryOptions{.time_end = time_end}));
  ReportOptions report;
  report.shared_time_axis = true;
  report.memory_curves = true;
  CheckPrintable(RenderHtmlReport(
      {ReportEntry{"simulated", plan, timeline}, ReportEntry{"measured", plan, timeline}}, report));
}

// As validate_simulate_fuzzer: a plan whose figures fit its stages, small enough to draw fast.
bool WorthRendering(const Plan& plan) {
  const Topology& topology = plan.request.topology;
  const int stages = topology.num_stages();
  return fuzz::SmallEnoughToPlan(topology) && ValidatePlan(plan).ok() &&
         ValidateCostModel(plan.request.costs, stages).ok() &&
         ValidateMemoryModel(plan.request.memory, stages).ok() &&
         ValidateStaticByRank(plan.request.memory, topology.ranks).ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckNumberFormats(data, size);
  const std::string_view text = fuzz::AsText(data, size);
  const StatusOr<Plan> plan = ParsePlan(text, DetectProtoFormat("", text));
  if (!plan.ok() || !ValidateStructure(*plan).ok() || !WorthRendering(*plan)) return 0;
  const StatusOr<Timeline> timeline = Simulate(*plan);
  PIPEPLAN_FUZZ_CHECK_OK(timeline.status());
  RenderAsSimulate(*plan, *timeline);
  RenderAsComparison(*plan, *timeline);
  return 0;
}
