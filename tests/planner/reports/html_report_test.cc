#include "pipeplan/reports/html_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/planner/planner.h"
#include "pipeplan/simulation/simulator.h"

namespace pipeplan {
namespace {

size_t Count(std::string_view text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

// Text between the first `open` and the next `close` after it.
std::string Between(const std::string& text, std::string_view open, std::string_view close) {
  const size_t begin = text.find(open);
  if (begin == std::string::npos) return "";
  const size_t body = begin + open.size();
  return text.substr(body, text.find(close, body) - body);
}

// A P-rank GPipe-like plan with made-up times: every rank runs F then B per microbatch.
ReportEntry MakeEntry(std::string name, int ranks, int microbatches, double f_time,
                      double zb_rate) {
  ReportEntry entry;
  entry.name = std::move(name);
  entry.plan.request.topology = Topology{ranks, 1, microbatches, Placement::kLoop};
  entry.plan.request.strategy = "gpipe";
  double makespan = 0;
  for (int r = 0; r < ranks; ++r) {
    RankProgram program;
    program.rank = RankId(r);
    RankTimeline rank_timeline;
    rank_timeline.rank = RankId(r);
    double t = r * f_time;
    for (int mb = 0; mb < microbatches; ++mb) {
      program.actions.push_back(MakeCompute(ActionKind::kForward, StageId(r), MicrobatchId(mb)));
      rank_timeline.actions.push_back({t, t + f_time});
      t += f_time;
    }
    for (int mb = 0; mb < microbatches; ++mb) {
      program.actions.push_back(MakeCompute(ActionKind::kBackward, StageId(r), MicrobatchId(mb)));
      rank_timeline.actions.push_back({t, t + 2 * f_time});
      t += 2 * f_time;
    }
    rank_timeline.peak_activation_memory = microbatches - r;
    makespan = std::max(makespan, t);
    entry.plan.programs.push_back(std::move(program));
    entry.timeline.ranks.push_back(std::move(rank_timeline));
  }
  Metrics& metrics = entry.timeline.metrics;
  metrics.makespan = makespan;
  metrics.zb_bubble_rate = zb_rate;
  metrics.bubble_fraction_max = 0.375;
  metrics.bubble_fraction_mean = 0.1875;
  metrics.lower_bound = 3 * f_time * microbatches;
  metrics.gap_to_lower_bound = makespan / metrics.lower_bound - 1;
  return entry;
}

std::vector<ReportEntry> ThreeEntries() {
  std::vector<ReportEntry> entries;
  entries.push_back(MakeEntry("slow", 2, 3, 2, 0.5));        // makespan 2 + 18 = 20
  entries.push_back(MakeEntry("fast", 2, 3, 1, 0.25));       // makespan 1 + 9 = 10
  entries.push_back(MakeEntry("medium", 3, 2, 1.5, 0.125));  // makespan 3 + 9 = 12
  return entries;
}

std::vector<std::string> BodyRows(const std::string& html) {
  const std::string body = Between(html, "<tbody>", "</tbody>");
  std::vector<std::string> rows;
  for (size_t at = body.find("<tr"); at != std::string::npos; at = body.find("<tr", at + 1)) {
    rows.push_back(body.substr(at, body.find("</tr>", at) - at));
  }
  return rows;
}

TEST(HtmlReportTest, IsOneSelfContainedPage) {
  ReportOptions options;
  options.title = "pipeplan report";
  const std::string html = RenderHtmlReport(ThreeEntries(), options);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(html, "<html"), 1u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);

  // No external references: the only URL is the SVG namespace, once per timeline.
  std::string stripped = html;
  const std::string xmlns = "xmlns=\"http://www.w3.org/2000/svg\"";
  for (size_t at = stripped.find(xmlns); at != std::string::npos; at = stripped.find(xmlns)) {
    stripped.erase(at, xmlns.size());
  }
  EXPECT_EQ(stripped.find("http://"), std::string::npos);
  EXPECT_EQ(stripped.find("https://"), std::string::npos);
  EXPECT_EQ(stripped.find("src="), std::string::npos);
  EXPECT_EQ(stripped.find("<link"), std::string::npos);
  EXPECT_EQ(stripped.find("<script"), std::string::npos);
}

TEST(HtmlReportTest, TableHasOneRowPerEntryWithMetrics) {
  const std::vector<ReportEntry> entries = ThreeEntries();
  const std::string html = RenderHtmlReport(entries, ReportOptions{});
  const std::vector<std::string> rows = BodyRows(html);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_NE(rows[0].find(">slow</a>"), std::string::npos);
  EXPECT_NE(rows[1].find(">fast</a>"), std::string::npos);
  EXPECT_NE(rows[2].find(">medium</a>"), std::string::npos);
  // fast: P=2, V=1, M=3, makespan 10, rates with 4 decimals, lower bound 9, peak memory 3.
  const std::string expected_cells =
      "<td>2</td><td>1</td><td>3</td><td>10</td><td>0.2500</td><td>0.3750</td><td>0.1875</td>"
      "<td>9</td><td>0.1111</td><td>3</td>";
  EXPECT_NE(rows[1].find(expected_cells), std::string::npos) << rows[1];
  for (const char* header : {"strategy", "ranks P", "stages/rank V", "microbatches M", "makespan",
                             "zb bubble rate", "lower bound"}) {
    EXPECT_NE(Between(html, "<thead>", "</thead>").find(header), std::string::npos) << header;
  }
}

TEST(HtmlReportTest, HighlightsTheBestMakespan) {
  const std::string html = RenderHtmlReport(ThreeEntries(), ReportOptions{});
  const std::vector<std::string> rows = BodyRows(html);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].rfind("<tr>", 0), 0u);
  EXPECT_EQ(rows[1].rfind("<tr class=\"best\">", 0), 0u);
  EXPECT_EQ(rows[2].rfind("<tr>", 0), 0u);
  EXPECT_EQ(Count(html, "<tr class=\"best\">"), 1u);
  EXPECT_NE(rows[1].find(">best</span>"), std::string::npos);  // not by colour alone
}

TEST(HtmlReportTest, TiesAreAllHighlighted) {
  std::vector<ReportEntry> entries = ThreeEntries();
  entries.push_back(MakeEntry("fast again", 2, 3, 1, 0.25));
  const std::string html = RenderHtmlReport(entries, ReportOptions{});
  EXPECT_EQ(Count(html, "<tr class=\"best\">"), 2u);
}

TEST(HtmlReportTest, OneSectionWithTimelinePerEntry) {
  const std::string html = RenderHtmlReport(ThreeEntries(), ReportOptions{});
  EXPECT_EQ(Count(html, "<h2>"), 3u);
  EXPECT_EQ(Count(html, "<svg "), 3u);
  EXPECT_EQ(Count(html, "</svg>"), 3u);
  EXPECT_NE(html.find("<h2>medium</h2>"), std::string::npos);
  // Table names link to their sections.
  EXPECT_NE(html.find("href=\"#plan-2\""), std::string::npos);
  EXPECT_NE(html.find("id=\"plan-2\""), std::string::npos);
  // The SVGs show every compute action: 2 * (3 + 3) * 2 ranks + (2 + 2) * 3 ranks.
  EXPECT_EQ(Count(html, "</title></rect>"), 36u);
}

TEST(HtmlReportTest, ExplainsTheBubbleMetrics) {
  const std::string html = RenderHtmlReport(ThreeEntries(), ReportOptions{});
  const std::string definitions = Between(html, "<p class=\"definitions\">", "</p>");
  EXPECT_NE(definitions.find("1 - busy / makespan"), std::string::npos);
  EXPECT_NE(definitions.find("(span - work) / span"), std::string::npos);
  EXPECT_NE(definitions.find("critical path of one microbatch"), std::string::npos);
}

TEST(HtmlReportTest, EscapesAllText) {
  std::vector<ReportEntry> entries;
  entries.push_back(MakeEntry("<script>alert(1)</script>", 2, 2, 1, 0));
  ReportOptions options;
  options.title = "A <&> B";
  options.subtitle = "P=2 \"quoted\" & 'single'";
  const std::string html = RenderHtmlReport(entries, options);
  EXPECT_NE(html.find("<title>A &lt;&amp;&gt; B</title>"), std::string::npos);
  EXPECT_NE(html.find("<h1>A &lt;&amp;&gt; B</h1>"), std::string::npos);
  EXPECT_NE(html.find("P=2 &quot;quoted&quot; &amp; &#39;single&#39;"), std::string::npos);
  EXPECT_NE(html.find("<h2>&lt;script&gt;alert(1)&lt;/script&gt;</h2>"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("A <&>"), std::string::npos);
}

TEST(HtmlReportTest, IsDeterministic) {
  ReportOptions options;
  options.subtitle = "P=2 M=3";
  EXPECT_EQ(RenderHtmlReport(ThreeEntries(), options), RenderHtmlReport(ThreeEntries(), options));
}

TEST(HtmlReportTest, EmptyReportIsStillAPage) {
  const std::string html = RenderHtmlReport({}, ReportOptions{});
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_EQ(Count(html, "<svg"), 0u);
}

}  // namespace
}  // namespace pipeplan

namespace pipeplan {
namespace {

// A real post-validation plan: ZB-V P=4 M=8 tags (P-1)^2 = 9 receives for rollback.
TEST(HtmlReportPostValidation, SaysWhereRollbackApplies) {
  PlanRequest request;
  request.strategy = "zbv";
  request.topology = {4, 2, 8, Placement::kVShape};
  request.costs.stages = {StageCosts{6, 8, 4, 4, 0}};
  request.costs.boundaries = {BoundaryCosts{1, 0, 0}};
  request.options.post_validation = true;
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const StatusOr<Timeline> timeline = Simulate(*plan);
  ASSERT_TRUE(timeline.ok());
  const std::string html = RenderHtmlReport({{"zbv", *plan, *timeline}}, ReportOptions{});
  EXPECT_NE(html.find("post-validation: PV on every rank (grey)"), std::string::npos);
  EXPECT_NE(html.find("; 9 receives tagged rollback (red marks)"), std::string::npos);
  // Rollback receives get their own red marks and legend entry in the timeline.
  EXPECT_NE(html.find("fill=\"#cc0000\""), std::string::npos);
  EXPECT_NE(html.find("rollback RECV (drained if PV fails)"), std::string::npos);
  // PV boxes are drawn although PV takes no modelled time.
  EXPECT_NE(html.find("PV ["), std::string::npos);
}

TEST(HtmlReportPostValidation, PlansWithoutPvSayNothingAboutIt) {
  PlanRequest request;
  request.strategy = "1f1b";
  request.topology = {2, 1, 2, Placement::kLoop};
  const StatusOr<Plan> plan = BuildPlan(request);
  ASSERT_TRUE(plan.ok());
  const std::string html = RenderHtmlReport({{"1f1b", *plan, *Simulate(*plan)}}, ReportOptions{});
  EXPECT_EQ(html.find("post-validation:"), std::string::npos);
  EXPECT_EQ(html.find("#cc0000"), std::string::npos);
}

}  // namespace
}  // namespace pipeplan
