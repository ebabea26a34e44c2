#include "pipeplan/reports/svg_timeline.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hand_made_plan.h"
#include "pipeplan/model/action.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/timeline.h"

namespace pipeplan {
namespace {

// ---- Fixture: two ranks, hand-made times (not from the simulator). ----

using testing::AddRank;
using testing::Comm;
using testing::Compute;
using testing::Timed;
using Fixture = testing::HandMadePlan;

// Makespan 10 on a 1000 px axis: 100 px per time unit, so pixels are easy to check by hand.
Fixture MakeFixture() {
  Fixture f;
  f.plan.request.topology = Topology{2, 1, 2, Placement::kLoop};
  using K = ActionKind;
  AddRank(f.plan, f.timeline,
          {
              {Compute(K::kForward, 0, 0), 0, 1},
              {Comm(K::kSendForward, 0, 0, 1), 1, 1.5},
              {Compute(K::kForward, 0, 1), 1, 2},
              {Comm(K::kSendForward, 0, 1, 1), 2, 2.5},
              {Comm(K::kRecvBackward, 0, 0, 1), 2.5, 4},
              {Compute(K::kBackward, 0, 0), 4, 6},
              {Compute(K::kBackwardInput, 0, 1), 6.5, 7.25},
              {Compute(K::kBackwardWeight, 0, 1), 7.25, 8},
          });
  AddRank(f.plan, f.timeline,
          {
              {Comm(K::kRecvForward, 1, 0, 0), 0, 1.5},
              {Compute(K::kForward, 1, 0), 1.5, 2.5},
              {MakeOverlap(Compute(K::kForward, 1, 1), Compute(K::kBackward, 1, 0)), 2.5, 4},
              {Comm(K::kSendBackward, 1, 0, 0), 4, 4},
              {Compute(K::kBackward, 1, 1), 4, 6},
              {Compute(K::kPostValidation, 1, 0), 9, 10},
          });
  f.timeline.metrics.makespan = 10;
  return f;
}

SvgOptions TestOptions() {
  SvgOptions options;
  options.width = 1000;
  options.row_height = 28;
  return options;
}

// The layout the renderer documents: axis from x = 64, rows from y = 10 (no title) with a
// pitch of row height 28 + comm lane 7 + gap 6 = 41.
constexpr double kX0 = 64;
constexpr double kScale = 100;
constexpr double kRow0 = 10;
constexpr double kRowPitch = 41;

// ---- Tiny SVG reading helpers. ----

// Body of the first <g> whose class is `css_class` ("" if absent).
std::string GroupBody(const std::string& svg, std::string_view css_class) {
  const std::string open = "<g class=\"" + std::string(css_class) + "\"";
  const size_t start = svg.find(open);
  if (start == std::string::npos) return "";
  const size_t body = svg.find('>', start) + 1;
  return svg.substr(body, svg.find("</g>", body) - body);
}

size_t Count(std::string_view text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

struct Element {
  std::string tag;  // the whole start tag
  std::string title;
  std::string text;

  std::string Attr(std::string_view name) const {
    const std::string key = " " + std::string(name) + "=\"";
    const size_t at = tag.find(key);
    if (at == std::string::npos) return "<missing>";
    const size_t begin = at + key.size();
    return tag.substr(begin, tag.find('"', begin) - begin);
  }
};

// Elements `<name ...>` in order, with their <title> or text content.
std::vector<Element> Elements(const std::string& body, std::string_view name) {
  std::vector<Element> elements;
  const std::string open = "<" + std::string(name) + " ";
  for (size_t at = body.find(open); at != std::string::npos; at = body.find(open, at + 1)) {
    Element element;
    const size_t tag_end = body.find('>', at);
    element.tag = body.substr(at, tag_end + 1 - at);
    const std::string close = "</" + std::string(name) + ">";
    if (element.tag.back() == '>' && element.tag[element.tag.size() - 2] != '/') {
      const size_t end = body.find(close, tag_end);
      const std::string content = body.substr(tag_end + 1, end - tag_end - 1);
      const size_t title = content.find("<title>");
      if (title != std::string::npos) {
        element.title = content.substr(title + 7, content.find("</title>") - title - 7);
      } else {
        element.text = content;
      }
    }
    elements.push_back(std::move(element));
  }
  return elements;
}

struct Box {
  std::string x, y, width, height;
};

void ExpectBox(const Element& rect, const Box& box) {
  EXPECT_EQ(rect.Attr("x"), box.x) << rect.tag;
  EXPECT_EQ(rect.Attr("y"), box.y) << rect.tag;
  EXPECT_EQ(rect.Attr("width"), box.width) << rect.tag;
  EXPECT_EQ(rect.Attr("height"), box.height) << rect.tag;
}

TEST(SvgTimelineTest, IsStandaloneSvg) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("viewBox=\"0 0 "), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<svg"), 1u);
  // Total width: 64 (labels) + 1000 (axis) + 32 (right margin).
  EXPECT_NE(svg.find("width=\"1096\""), std::string::npos);
}

TEST(SvgTimelineTest, OneBoxPerComputeActionScaledByTime) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());

  const std::vector<Element> forwards = Elements(GroupBody(svg, "pp-F"), "rect");
  ASSERT_EQ(forwards.size(), 3u);
  // 0F0 [0, 1] on rank 0: x = 64 + 0 * 100, width = 100.
  ExpectBox(forwards[0], {"64", "10", "100", "28"});
  ExpectBox(forwards[1], {"164", "10", "100", "28"});  // 0F1 [1, 2]
  ExpectBox(forwards[2], {"214", "51", "100", "28"});  // 1F0 [1.5, 2.5]
  const std::vector<Element> backwards = Elements(GroupBody(svg, "pp-B"), "rect");
  ASSERT_EQ(backwards.size(), 2u);
  ExpectBox(backwards[0], {"464", "10", "200", "28"});  // 0B0 [4, 6]
  ExpectBox(backwards[1], {"464", "51", "200", "28"});  // 1B1 [4, 6]
  const std::vector<Element> inputs = Elements(GroupBody(svg, "pp-I"), "rect");
  ASSERT_EQ(inputs.size(), 1u);
  ExpectBox(inputs[0], {"714", "10", "75", "28"});  // 0I1 [6.5, 7.25]
  const std::vector<Element> weights = Elements(GroupBody(svg, "pp-W"), "rect");
  ASSERT_EQ(weights.size(), 1u);
  ExpectBox(weights[0], {"789", "10", "75", "28"});  // 0W1 [7.25, 8]
  const std::vector<Element> pv = Elements(GroupBody(svg, "pp-PV"), "rect");
  ASSERT_EQ(pv.size(), 1u);
  ExpectBox(pv[0], {"964", "51", "100", "28"});  // 1PV [9, 10]

  // Every compute box and only those carry a tooltip: 9 compute actions, 9 titles.
  EXPECT_EQ(Count(svg, "</title></rect>"), 9u);
  EXPECT_EQ(forwards[0].title, "0F0 [0, 1]");
  EXPECT_EQ(inputs[0].title, "0I1 [6.5, 7.25]");
  EXPECT_EQ(kX0 + 6.5 * kScale, 714);  // the hand computation above, spelled out once
  EXPECT_EQ(kRow0 + kRowPitch, 51);
}

// A measured step whose post-validation failed: rank 0's F0 first ran at [0, 0.5] and was
// replayed at [0, 1]; the first run is a hatched box with its own tooltip and a legend entry.
TEST(SvgTimelineTest, ADiscardedFirstRunIsHatchedWithItsOwnTooltipAndLegend) {
  Fixture f = MakeFixture();
  const std::string plain = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  EXPECT_EQ(plain.find("pp-hatch"), std::string::npos) << "no pattern without a discarded run";
  f.timeline.ranks[0].discarded.push_back(
      {.action_index = 0, .timing = {.start = 0, .end = 0.5, .thread = kComputeThread}});
  // A discarded transfer is not drawn (the replay's marks show its transfer).
  f.timeline.ranks[0].discarded.push_back(
      {.action_index = 1, .timing = {.start = 0.5, .end = 0.6, .thread = kCommThread}});
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  EXPECT_NE(svg.find("<defs><pattern id=\"pp-hatch\""), std::string::npos);
  const std::vector<Element> discarded = Elements(GroupBody(svg, "pp-discarded"), "rect");
  ASSERT_EQ(discarded.size(), 1u);
  ExpectBox(discarded[0], {"64", "10", "50", "28"});
  EXPECT_EQ(discarded[0].title,
            "0F0 [0, 0.5] discarded: a failed post-validation undid its weights; run again");
  EXPECT_NE(svg.find("fill=\"url(#pp-hatch)\""), std::string::npos);
  EXPECT_NE(svg.find("discarded: ran on weights a failed post-validation undid</text>"),
            std::string::npos);
  // The replay keeps its own box.
  EXPECT_EQ(Elements(GroupBody(svg, "pp-F"), "rect").size(), 3u);
}

TEST(SvgTimelineTest, OverlapIsOneCellSplitInTwoHalves) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  // (1F1;1B0) [2.5, 4] on rank 1: the whole cell, then its lower (B) half over it.
  const std::vector<Element> cells = Elements(GroupBody(svg, "pp-OVERLAP"), "rect");
  ASSERT_EQ(cells.size(), 1u);
  ExpectBox(cells[0], {"314", "51", "150", "28"});
  EXPECT_EQ(cells[0].title, "(1F1;1B0)OVERLAP_F_B [2.5, 4]");
  const std::vector<Element> lower = Elements(GroupBody(svg, "pp-OVERLAP-B"), "rect");
  ASSERT_EQ(lower.size(), 1u);
  ExpectBox(lower[0], {"314", "65", "150", "14"});
  EXPECT_NE(cells[0].tag, lower[0].tag);

  // Half labels: F's microbatch 1 in the upper half, B's microbatch 0 in the lower one.
  const std::vector<Element> labels = Elements(GroupBody(svg, "pp-half-labels"), "text");
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0].text, "1");
  EXPECT_EQ(labels[0].Attr("x"), "389");
  EXPECT_EQ(labels[1].text, "0");
  EXPECT_EQ(labels[1].Attr("x"), "389");
  EXPECT_LT(std::stod(labels[0].Attr("y")), 65);
  EXPECT_GT(std::stod(labels[1].Attr("y")), 65);
}

TEST(SvgTimelineTest, LabelsShowMicrobatchWhenTheyFit) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  const std::vector<Element> labels = Elements(GroupBody(svg, "pp-labels"), "text");
  // F0, F1, B0, I1, W1 on rank 0; F0, B1, PV on rank 1.
  ASSERT_EQ(labels.size(), 8u);
  EXPECT_EQ(labels[0].text, "0");
  EXPECT_EQ(labels[0].Attr("x"), "114");  // centre of [64, 164]
  EXPECT_EQ(labels.back().text, "PV");

  SvgOptions no_labels = TestOptions();
  no_labels.show_labels = false;
  const std::string bare = RenderSvgTimeline(f.plan, f.timeline, no_labels);
  EXPECT_EQ(GroupBody(bare, "pp-labels"), "");
  EXPECT_EQ(GroupBody(bare, "pp-half-labels"), "");

  // On a 100 px axis (10 px per unit) only boxes wide enough for their text keep a label:
  // F (10 px) and B (20 px) do, I and W (7.5 px) and "PV" (10 px) do not.
  SvgOptions narrow = TestOptions();
  narrow.width = 100;
  const std::string small = RenderSvgTimeline(f.plan, f.timeline, narrow);
  const std::vector<Element> kept = Elements(GroupBody(small, "pp-labels"), "text");
  ASSERT_EQ(kept.size(), 5u);
  for (const Element& label : kept) EXPECT_NE(label.text, "PV");
}

TEST(SvgTimelineTest, RankLabelsAxisAndLegend) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  const std::vector<Element> ranks = Elements(GroupBody(svg, "pp-ranks"), "text");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].text, "rank 0");
  EXPECT_EQ(ranks[1].text, "rank 1");

  // 10 units over 1000 px with ~100 px spacing: a tick every 1 unit, 0..10, unit-less.
  const std::vector<Element> ticks = Elements(GroupBody(svg, "pp-ticks"), "text");
  ASSERT_EQ(ticks.size(), 11u);
  EXPECT_EQ(ticks[0].text, "0");
  EXPECT_EQ(ticks[0].Attr("x"), "64");
  EXPECT_EQ(ticks[10].text, "10");
  EXPECT_EQ(ticks[10].Attr("x"), "1064");

  const std::string legend = GroupBody(svg, "pp-legend");
  for (const char* kind :
       {"F forward", "B backward", "I input grad", "W weight grad", "F&amp;B overlap",
        "PV post-validation", "activation comm", "gradient comm"}) {
    EXPECT_NE(legend.find(kind), std::string::npos) << kind;
  }
  EXPECT_EQ(legend.find("PV comm"), std::string::npos);  // not in this plan
}

TEST(SvgTimelineTest, CommMarksUnderTheRows) {
  const Fixture f = MakeFixture();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  // Activation comm: 0SEND_F0 [1, 1.5], 0SEND_F1 [2, 2.5] in the send strip under rank 0
  // (y = 10 + 28 + 1), 1RECV_F0 [0, 1.5] in the recv strip under rank 1 (y = 51 + 28 + 1 + 3).
  EXPECT_NE(svg.find("d=\"M164 39h50v2h-50zM264 39h50v2h-50zM64 83h150v3h-150z\""),
            std::string::npos);
  // Gradient comm: 0RECV_B0 [2.5, 4] waits; the instantaneous 1SEND_B0 still shows as 1 px.
  EXPECT_NE(svg.find("d=\"M314 42h150v3h-150zM464 80h1v2h-1z\""), std::string::npos);
}

TEST(SvgTimelineTest, TitleIsEscapedAndShiftsRows) {
  const Fixture f = MakeFixture();
  SvgOptions options = TestOptions();
  options.title = "a<b & \"c\">d";
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, options);
  EXPECT_NE(svg.find(">a&lt;b &amp; &quot;c&quot;&gt;d</text>"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
  EXPECT_EQ(svg.find("& \""), std::string::npos);
  // With a title, rank 0's row starts at y = 34.
  ExpectBox(Elements(GroupBody(svg, "pp-F"), "rect")[0], {"64", "34", "100", "28"});
}

TEST(SvgTimelineTest, IsDeterministic) {
  const Fixture f = MakeFixture();
  const Fixture g = MakeFixture();
  EXPECT_EQ(RenderSvgTimeline(f.plan, f.timeline, TestOptions()),
            RenderSvgTimeline(g.plan, g.timeline, TestOptions()));
}

TEST(SvgTimelineTest, EmptyPlanStillRenders) {
  const std::string svg = RenderSvgTimeline(Plan{}, Timeline{}, SvgOptions{});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(Count(svg, "<title>"), 0u);
}

TEST(SvgTimelineTest, OddTimesStillRenderFewTicks) {
  Fixture f = MakeFixture();
  f.timeline.ranks[0].actions[0] = {-1e300, 1e300};  // span overflows to infinity
  f.timeline.ranks[1].actions[1].start = std::numeric_limits<double>::quiet_NaN();
  const std::string svg = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_LE(Count(GroupBody(svg, "pp-ticks"), "<text"), 100u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);

  f = MakeFixture();
  f.timeline.metrics.makespan = 1e12;  // huge but finite: a handful of ticks, not millions
  const std::string wide = RenderSvgTimeline(f.plan, f.timeline, TestOptions());
  EXPECT_LE(Count(GroupBody(wide, "pp-ticks"), "<text"), 41u);
  EXPECT_GE(Count(GroupBody(wide, "pp-ticks"), "<text"), 3u);
}

// P=32, M=256 (1F1B-like, made-up times): one box each, tooltip the only per-box string.
TEST(SvgTimelineTest, LargePlanStaysCompact) {
  constexpr int kRanks = 32;
  constexpr int kMicrobatches = 256;
  Plan plan;
  Timeline timeline;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<Timed> entries;
    double t = r;
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      entries.push_back({Compute(ActionKind::kForward, r, mb), t, t + 1});
      entries.push_back({Comm(ActionKind::kSendForward, r, mb, (r + 1) % kRanks), t + 1, t + 1});
      entries.push_back({Compute(ActionKind::kBackward, r, mb), t + 1, t + 3});
      t += 3;
    }
    AddRank(plan, timeline, entries);
  }
  timeline.metrics.makespan = kRanks + 3.0 * kMicrobatches;
  const std::string svg = RenderSvgTimeline(plan, timeline, SvgOptions{});
  EXPECT_EQ(Count(svg, "</title></rect>"), 2u * kRanks * kMicrobatches);
  EXPECT_LT(svg.size(), 100u * 2 * kRanks * kMicrobatches) << "bytes per box grew";
}

}  // namespace
}  // namespace pipeplan
