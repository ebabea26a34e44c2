// Consecutive steps on one axis (svg_steps.h): each step's actions follow the plan's with its
// microbatches numbered on, its times moved by its offset; the SVG draws them as one timeline.
#include "pipeplan/reports/svg_steps.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "hand_made_plan.h"

namespace pipeplan {
namespace {

using testing::AddRank;
using testing::Comm;
using testing::Compute;
using K = ActionKind;

// Two ranks, M = 2, a step of length 6; a replayed forward discarded on rank 1.
testing::HandMadePlan OneStep() {
  testing::HandMadePlan f;
  f.plan.request.topology = Topology{2, 1, 2, Placement::kLoop};
  AddRank(f.plan, f.timeline,
          {{Compute(K::kForward, 0, 0), 0, 1},
           {Comm(K::kSendForward, 0, 0, 1), 1, 1},
           {Compute(K::kForward, 0, 1), 1, 2},
           {Compute(K::kBackward, 0, 0), 4, 6}});
  AddRank(f.plan, f.timeline,
          {{Comm(K::kRecvForward, 1, 0, 0), 0, 1},
           {Compute(K::kForward, 1, 0), 1, 2},
           {Compute(K::kBackward, 1, 0), 2, 4}});
  f.timeline.ranks[1].discarded.push_back({.action_index = 1, .timing = {0.5, 1.0}});
  f.timeline.metrics.makespan = 6;
  return f;
}

TEST(ConsecutiveSteps, NumbersEachStepsMicrobatchesOnAndMovesItsTimes) {
  const testing::HandMadePlan step = OneStep();
  // The second step starts at 5, over the first one's tail (its B ends at 6).
  const std::vector<Timeline> steps = {step.timeline, step.timeline};
  const std::vector<double> offsets = {0.0, 5.0};
  const auto joined = ConsecutiveSteps(step.plan, steps, offsets);
  ASSERT_TRUE(joined.ok()) << joined.status().message();
  const auto& [plan, timeline] = *joined;
  EXPECT_EQ(plan.request.topology.microbatches, 4);
  for (size_t r = 0; r < 2; ++r) {
    const std::vector<Action>& one = step.plan.programs[r].actions;
    ASSERT_EQ(plan.programs[r].actions.size(), 2 * one.size());
    ASSERT_EQ(timeline.ranks[r].actions.size(), 2 * one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      const Action& second = plan.programs[r].actions[one.size() + i];
      EXPECT_EQ(second.kind, one[i].kind);
      EXPECT_EQ(second.stage, one[i].stage);
      EXPECT_EQ(second.microbatch.value, one[i].microbatch.value + 2);
      EXPECT_EQ(plan.programs[r].actions[i], one[i]);
      EXPECT_EQ(timeline.ranks[r].actions[one.size() + i].start,
                step.timeline.ranks[r].actions[i].start + 5.0);
    }
  }
  // Rank 1's discarded run, once per step, pointing at its own step's action.
  ASSERT_EQ(timeline.ranks[1].discarded.size(), 2u);
  EXPECT_EQ(timeline.ranks[1].discarded[1].action_index, 4u);
  EXPECT_EQ(timeline.ranks[1].discarded[1].timing.start, 5.5);
  EXPECT_EQ(timeline.metrics.makespan, 11.0);
  // Drawn: the second step's microbatches by their new numbers.
  const auto svg = RenderSvgSteps(step.plan, steps, offsets, SvgOptions{});
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find(">3</text>"), std::string::npos);
}

TEST(ConsecutiveSteps, RefusesStepsThatAreNotThePlans) {
  const testing::HandMadePlan step = OneStep();
  Timeline short_one = step.timeline;
  short_one.ranks[1].actions.pop_back();
  const std::vector<Timeline> steps = {step.timeline, short_one};
  const std::vector<double> offsets = {0.0, 6.0};
  const auto joined = ConsecutiveSteps(step.plan, steps, offsets);
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().message(),
            "consecutive steps: step 1, rank 1 times 2 actions of the plan's 3");
  const std::vector<double> one_offset = {0.0};
  EXPECT_FALSE(ConsecutiveSteps(step.plan, steps, one_offset).ok());
}

// An action's hover title in a rendered picture: its token and [start, end].
std::string Span(const std::string& token, double start, double end) {
  char text[64];
  std::snprintf(text, sizeof text, "<title>%s [%g, %g]</title>", token.c_str(), start, end);
  return text;
}

TEST(MeasuredSteps, AtMostThreeStepsEachFromItsStartOnTheRunsClock) {
  const testing::HandMadePlan step = OneStep();
  const std::vector<Timeline> steps(4, step.timeline);
  const std::vector<double> starts = {10.0, 15.0, 21.0, 30.0};
  const auto svg = RenderMeasuredStepsSvg(step.plan, steps, starts,
                                          {.name = "p.pb", .first_step = 2, .step_barrier = false});
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("p.pb: measured steps 2 to 4, no step barrier (step k"), std::string::npos);
  EXPECT_EQ(svg->find("back to back"), std::string::npos);
  // Step 3's 0F4 (its first forward) at its start, 21 - 10 = 11 on the picture's axis.
  EXPECT_NE(svg->find(Span("0F4", 11, 12)), std::string::npos) << *svg;
  EXPECT_EQ(svg->find("<title>0F6 "), std::string::npos) << "a fourth step drawn";
  const std::vector<double> too_few = {0.0};
  EXPECT_FALSE(RenderMeasuredStepsSvg(step.plan, steps, too_few, {}).ok());
}

TEST(MeasuredSteps, WithoutARunClockTheStepsAreDrawnBackToBackAndSaySo) {
  const testing::HandMadePlan step = OneStep();
  const std::vector<Timeline> steps(2, step.timeline);
  const auto svg = RenderMeasuredStepsSvg(step.plan, steps, {},
                                          {.name = "p.pb", .first_step = 1, .step_barrier = true});
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("measured steps 1 to 2, each opened by the step barrier, drawn back to "
                      "back (each step timed from the barrier that opened it)"),
            std::string::npos);
  // The second step's 0F2 right after the first step's makespan, 6.
  EXPECT_NE(svg->find(Span("0F2", 6, 7)), std::string::npos) << *svg;
}

}  // namespace
}  // namespace pipeplan
