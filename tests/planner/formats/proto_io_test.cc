// Round trips, determinism, proto3 defaults and parse errors of the pipeplan.v1 conversion layer.
#include "pipeplan/formats/proto_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace pipeplan {
namespace {

Action Comm(ActionKind kind, int stage, int mb, int peer, bool rollback = false) {
  Action action = MakeCompute(kind, StageId(stage), MicrobatchId(mb));
  action.peer = RankId(peer);
  action.rollback = rollback;
  return action;
}

Action Compute(ActionKind kind, int stage, int mb) {
  return MakeCompute(kind, StageId(stage), MicrobatchId(mb));
}

Action PostValidation(ActionKind kind, int stage, int peer) {
  Action action = MakeCompute(kind, StageId(stage), MicrobatchId(0));
  action.peer = RankId(peer);
  return action;
}

PlanRequest MakeRequest() {
  PlanRequest request;
  request.topology = {
      .ranks = 2, .stages_per_rank = 2, .microbatches = 2, .placement = Placement::kVShape};
  request.strategy = "zbv-handcrafted";
  request.options = {
      .microbatch_group_size = 3, .post_validation = true, .order_limit = 6.25 + 1.0 / 7};
  // Fractions that have no short decimal form check that text and JSON keep every bit.
  request.costs.stages = {
      {.forward = 0.1,
       .backward = 0.2,
       .backward_input = 0.15,
       .backward_weight = 0.05,
       .overlap = 0.25},
      {.forward = 1.0 / 3, .backward = 2.0 / 3, .backward_input = 0.5, .backward_weight = 1.0 / 6},
      {.forward = 1, .backward = 2, .backward_input = 1, .backward_weight = 1, .overlap = 2.5},
      {.forward = 1e-9, .backward = 1e12, .backward_input = 0, .backward_weight = 7},
  };
  request.costs.boundaries = {
      {.latency = 0.5, .bandwidth = 100, .activation_bytes = 4096, .receive_overhead = 0.75},
      {.latency = 0, .bandwidth = 0, .activation_bytes = 0},
      {.latency = 0.125, .bandwidth = 1e9, .activation_bytes = 1.5e6},
  };
  request.memory.stages = {{.activation = 0.5, .freed_by_input = 0.1},
                           {.activation = 0, .freed_by_input = 0},
                           {.activation = 0.25, .freed_by_input = 0.125},
                           {.activation = 1.0 / 3, .freed_by_input = 0}};
  request.memory.static_per_rank = 1.5;
  request.memory.first_stage_data_per_microbatch = 0.75;
  request.memory.last_stage_data_per_microbatch = 0.5;
  request.memory.limit = 6.25;
  return request;
}

// Every action kind, overlap sub-actions, comm peers, a rollback RECV_F and PV actions. The
// order need not be a valid schedule: the conversion layer keeps whatever it is given.
Plan MakePlan() {
  Plan plan;
  plan.request = MakeRequest();
  using enum ActionKind;
  plan.programs.push_back(
      {.rank = RankId(0),
       .actions = {Compute(kForward, 0, 0), Comm(kSendForward, 0, 0, 1), Compute(kForward, 0, 1),
                   Comm(kSendForward, 0, 1, 1), PostValidation(kRecvPostValidation, 0, 1),
                   PostValidation(kPostValidation, 0, 0), Comm(kRecvForward, 3, 0, 1, true),
                   Compute(kForward, 3, 0), Compute(kBackwardInput, 3, 0),
                   Comm(kRecvForward, 3, 1, 1),
                   MakeOverlap(Compute(kForward, 3, 1), Compute(kBackward, 3, 0)),
                   Compute(kBackwardWeight, 3, 0), Comm(kSendBackward, 3, 1, 1),
                   Comm(kRecvBackward, 0, 0, 1), Compute(kBackward, 0, 0)}});
  plan.programs.push_back(
      {.rank = RankId(1),
       .actions = {Comm(kRecvForward, 1, 0, 0, true), Compute(kForward, 1, 0),
                   Compute(kForward, 2, 0), Comm(kSendForward, 2, 0, 0),
                   Comm(kRecvBackward, 2, 0, 0), Compute(kBackward, 2, 0), Compute(kBackward, 1, 0),
                   Comm(kSendBackward, 1, 0, 0), PostValidation(kSendPostValidation, 1, 0),
                   PostValidation(kPostValidation, 1, 0)}});
  plan.provenance = {.tool_version = "0.1.0",
                     .strategy = "zbv-handcrafted",
                     .options = "post_validation=true",
                     .solver_status = "feasible, gap 0.4% to the proven bound",
                     .proven_bound = 123.5};
  return plan;
}

Timeline MakeTimeline() {
  Timeline timeline;
  timeline.source = TimelineSource::kMeasured;
  timeline.ranks.push_back(
      {.rank = RankId(0),
       .actions = {{.start = 0, .end = 0.1}, {.start = 0.1, .end = 0.1 + 0.2}},
       .busy = 0.3,
       .first_start = 0,
       .last_end = 0.30000000000000004,
       .peak_activation_memory = 2,
       .peak_memory = 3.5,
       .memory = {{.time = 0, .bytes = 1.5}, {.time = 0.1, .bytes = 3.5}},
       .clock = OpClock::kProfilerDevice,
       .memory_unit = MemoryUnit::kBytes,
       .action_memory = {{.start = 1, .end = 2.5, .peak = 4},
                         {.start = 2.5, .end = 2, .peak = 2.5}},
       .discarded = {{.action_index = 1, .timing = {.start = 0.05, .end = 0.08, .thread = 1}}},
       .stage_static = {
           {.stage = StageId(0), .bytes = 1.25, .input_bytes = 0.5, .target_bytes = 0.25}}});
  timeline.ranks.push_back({.rank = RankId(1),
                            .actions = {{.start = 1.0 / 3, .end = 2.0 / 3}},
                            .busy = 1.0 / 3,
                            .first_start = 1.0 / 3,
                            .last_end = 2.0 / 3,
                            .peak_activation_memory = 1,
                            .peak_memory = 2.5,
                            .memory = {},
                            .action_memory = {},
                            .discarded = {},
                            .stage_static = {}});
  timeline.metrics = {.makespan = 2.0 / 3,
                      .zb_bubble_rate = 0.1,
                      .bubble_fraction_max = 0.5,
                      .bubble_fraction_mean = 0.25,
                      .lower_bound = 0.6,
                      .gap_to_lower_bound = 2.0 / 3 / 0.6 - 1};
  return timeline;
}

// Two stages: F and B on one, the split and overlap on the other; a measured boundary.
Profile MakeProfile() {
  Profile profile;
  profile.source = "torch cuda: NVIDIA H100";
  profile.steps = 10;
  profile.stages = {
      {.forward =
           {.samples = 20, .median = 0.1, .min = 0.05, .max = 1.0 / 3, .p10 = 0.07, .p90 = 0.2},
       .backward = {.samples = 20, .median = 0.2, .min = 0.2, .max = 0.2, .p10 = 0.2, .p90 = 0.2},
       .backward_input = {},
       .backward_weight = {},
       .overlap = {}},
      {.forward =
           {.samples = 1, .median = 1e-9, .min = 1e-9, .max = 1e-9, .p10 = 1e-9, .p90 = 1e-9},
       .backward = {},
       .backward_input = {.samples = 3, .median = 2, .min = 1, .max = 3, .p10 = 1.2, .p90 = 2.8},
       .backward_weight = {.samples = 3, .median = 1, .min = 1, .max = 1, .p10 = 1, .p90 = 1},
       .overlap =
           {.samples = 2, .median = 2.5, .min = 2, .max = 3, .p10 = 2.1, .p90 = 2.9, .mean = 2.5}},
  };
  profile.boundaries = {
      {.transfer =
           {.samples = 7, .median = 1.0 / 7, .min = 0.125, .max = 0.25, .p10 = 0.13, .p90 = 0.2},
       .late_receives = 13,
       .latency = 5e-6,
       .bandwidth = 2.5e10,
       .activation_bytes = 1 << 20,
       .receive_overhead = {.samples = 4,
                            .median = 3e-4,
                            .min = 1e-4,
                            .max = 2e-3,
                            .p10 = 1.5e-4,
                            .p90 = 1.5e-3,
                            .mean = 7e-4},
       .same_rank = true}};
  return profile;
}

std::string FormatName(ProtoFormat format) {
  switch (format) {
    case ProtoFormat::kBinary:
      return "Binary";
    case ProtoFormat::kText:
      return "Text";
    case ProtoFormat::kJson:
      return "Json";
  }
  return "Unknown";
}

class ProtoRoundTripTest : public ::testing::TestWithParam<ProtoFormat> {};

INSTANTIATE_TEST_SUITE_P(AllFormats, ProtoRoundTripTest,
                         ::testing::Values(ProtoFormat::kBinary, ProtoFormat::kText,
                                           ProtoFormat::kJson),
                         [](const auto& param_info) { return FormatName(param_info.param); });

TEST_P(ProtoRoundTripTest, Plan) {
  const Plan plan = MakePlan();
  const StatusOr<std::string> data = SerializePlan(plan, GetParam());
  ASSERT_TRUE(data.ok()) << data.status().message();
  const StatusOr<Plan> parsed = ParsePlan(*data, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, plan);
}

// UTF-8 of every length survives every format (the check that refuses invalid strings must
// not refuse these).
TEST_P(ProtoRoundTripTest, PlanWithUnicodeStrings) {
  Plan plan = MakePlan();
  plan.provenance.options = "\xc3\xbc \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82";  // ü 日本 🙂
  const StatusOr<std::string> data = SerializePlan(plan, GetParam());
  ASSERT_TRUE(data.ok()) << data.status().message();
  const StatusOr<Plan> parsed = ParsePlan(*data, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, plan);
}

// A string that is not UTF-8 (e.g. 'import --strategy-name' from a shell) is refused when
// written, in every format: a binary file holding it would not read back.
TEST_P(ProtoRoundTripTest, PlanWithInvalidUtf8IsNotWritten) {
  Plan plan = MakePlan();
  plan.provenance.strategy = "zb\xff";
  const StatusOr<std::string> data = SerializePlan(plan, GetParam());
  EXPECT_EQ(data.status().message(),
            "cannot write pipeplan.v1.Plan: provenance.strategy: not valid UTF-8 (protobuf "
            "strings must be UTF-8)");
}

TEST_P(ProtoRoundTripTest, Request) {
  const PlanRequest request = MakeRequest();
  const StatusOr<std::string> data = SerializeRequest(request, GetParam());
  ASSERT_TRUE(data.ok()) << data.status().message();
  const StatusOr<PlanRequest> parsed = ParseRequest(*data, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, request);
}

TEST_P(ProtoRoundTripTest, RequestWithoutLimitOrWithZeroLimit) {
  PlanRequest request = MakeRequest();
  for (const std::optional<double> limit : {std::optional<double>(), std::optional<double>(0.0)}) {
    request.memory.limit = limit;
    const StatusOr<std::string> data = SerializeRequest(request, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<PlanRequest> parsed = ParseRequest(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->memory.limit, limit);
  }
}

// The limit a strategy orders under: unset (the memory limit's), a number, or none (+inf).
TEST_P(ProtoRoundTripTest, RequestWithEveryKindOfOrderLimit) {
  PlanRequest request = MakeRequest();
  for (const std::optional<double> order :
       {std::optional<double>(), std::optional<double>(std::numeric_limits<double>::infinity()),
        std::optional<double>(1e-300)}) {
    request.options.order_limit = order;
    const StatusOr<std::string> data = SerializeRequest(request, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<PlanRequest> parsed = ParseRequest(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->options.order_limit, order);
  }
}

TEST_P(ProtoRoundTripTest, RequestOfEitherFigureScope) {
  PlanRequest request = MakeRequest();
  for (const FigureScope figures : {FigureScope::kStage, FigureScope::kRankShare}) {
    request.figures = figures;
    const StatusOr<std::string> data = SerializeRequest(request, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<PlanRequest> parsed = ParseRequest(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->figures, figures);
  }
}

TEST_P(ProtoRoundTripTest, LoopAndDualPlacements) {
  PlanRequest request = MakeRequest();
  for (const Placement placement : {Placement::kLoop, Placement::kVShape, Placement::kDual}) {
    request.topology.placement = placement;
    const StatusOr<std::string> data = SerializeRequest(request, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<PlanRequest> parsed = ParseRequest(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->topology.placement, placement);
  }
}

TEST_P(ProtoRoundTripTest, CostModel) {
  const CostModel costs = MakeRequest().costs;
  const StatusOr<std::string> data = SerializeCostModel(costs, GetParam());
  ASSERT_TRUE(data.ok()) << data.status().message();
  const StatusOr<CostModel> parsed = ParseCostModel(*data, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, costs);
}

TEST_P(ProtoRoundTripTest, Timeline) {
  for (const TimelineSource source : {TimelineSource::kSimulated, TimelineSource::kMeasured}) {
    Timeline timeline = MakeTimeline();
    timeline.source = source;
    const StatusOr<std::string> data = SerializeTimeline(timeline, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<Timeline> parsed = ParseTimeline(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, timeline);
  }
}

TEST_P(ProtoRoundTripTest, TimelineFileWithPlanAndTimeScale) {
  for (const std::optional<double> scale : {std::optional<double>(), std::optional<double>(2e-3)}) {
    const TimelineFile file{MakeTimeline(), MakePlan(), scale};
    const StatusOr<std::string> data = SerializeTimelineFile(file, GetParam());
    ASSERT_TRUE(data.ok()) << data.status().message();
    const StatusOr<TimelineFile> parsed = ParseTimelineFile(*data, GetParam());
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(parsed->timeline, file.timeline);
    EXPECT_EQ(parsed->plan, file.plan);
    EXPECT_EQ(parsed->seconds_per_unit, scale);
  }
}

TEST_P(ProtoRoundTripTest, Profile) {
  const Profile profile = MakeProfile();
  ASSERT_TRUE(ValidateProfile(profile).ok()) << ValidateProfile(profile).message();
  const StatusOr<std::string> data = SerializeProfile(profile, GetParam());
  ASSERT_TRUE(data.ok()) << data.status().message();
  const StatusOr<Profile> parsed = ParseProfile(*data, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, profile);
}

TEST_P(ProtoRoundTripTest, SerialisingTwiceGivesIdenticalBytes) {
  const StatusOr<std::string> first = SerializePlan(MakePlan(), GetParam());
  const StatusOr<std::string> second = SerializePlan(MakePlan(), GetParam());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
  // And a parsed copy serialises to the same bytes again.
  const StatusOr<Plan> parsed = ParsePlan(*first, GetParam());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const StatusOr<std::string> third = SerializePlan(*parsed, GetParam());
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, *first);

  const StatusOr<std::string> timeline_a = SerializeTimeline(MakeTimeline(), GetParam());
  const StatusOr<std::string> timeline_b = SerializeTimeline(MakeTimeline(), GetParam());
  ASSERT_TRUE(timeline_a.ok() && timeline_b.ok());
  EXPECT_EQ(*timeline_a, *timeline_b);
}

TEST(ProtoIoTest, JsonPrintsEveryFieldWithProtoNames) {
  const StatusOr<std::string> json = SerializeCostModel(CostModel{}, ProtoFormat::kJson);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json,
            "{\n"
            " \"stages\": [\n"
            "  {\n"
            "   \"forward\": 1,\n"
            "   \"backward\": 2,\n"
            "   \"backward_input\": 1,\n"
            "   \"backward_weight\": 1,\n"
            "   \"overlap\": 0\n"
            "  }\n"
            " ],\n"
            " \"boundaries\": [\n"
            "  {\n"
            "   \"latency\": 0,\n"
            "   \"bandwidth\": 0,\n"
            "   \"activation_bytes\": 0,\n"
            "   \"receive_overhead\": 0\n"
            "  }\n"
            " ],\n"
            " \"time_unit\": \"\",\n"
            " \"chains\": 0,\n"
            " \"sources\": [],\n"
            " \"runs\": [],\n"
            " \"format_version\": 1,\n"
            " \"kind\": \"COST_MODEL\"\n"
            "}\n");
}

TEST(ProtoIoTest, PlanJsonShowsZeroPeersAndFalseRollbacks) {
  const StatusOr<std::string> json = SerializePlan(MakePlan(), ProtoFormat::kJson);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->find("\"peer\": 0"), std::string::npos);
  EXPECT_NE(json->find("\"rollback\": false"), std::string::npos);
  EXPECT_NE(json->find("\"kind\": \"OVERLAP_F_B\""), std::string::npos);
  EXPECT_NE(json->find("\"sub_actions\": []"), std::string::npos);
}

TEST(ProtoIoTest, TextFormatIsReadable) {
  const StatusOr<std::string> text = SerializeCostModel(CostModel{}, ProtoFormat::kText);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "stages {\n"
            "  forward: 1\n"
            "  backward: 2\n"
            "  backward_input: 1\n"
            "  backward_weight: 1\n"
            "}\n"
            "boundaries {\n"
            "}\n"
            "format_version: 1\n"
            "kind: COST_MODEL\n");
}

TEST(ProtoIoTest, Proto3DefaultsBecomeDomainDefaults) {
  const StatusOr<PlanRequest> request =
      ParseRequest("topology { ranks: 4 microbatches: 8 }\n", ProtoFormat::kText);
  ASSERT_TRUE(request.ok()) << request.status().message();
  PlanRequest expected;
  // V = 0 stays 0 in a request: the planner picks the strategy's default.
  expected.topology = {
      .ranks = 4, .stages_per_rank = 0, .microbatches = 8, .placement = Placement::kLoop};
  EXPECT_EQ(*request, expected);
  EXPECT_EQ(request->costs.stages, std::vector<StageCosts>{StageCosts{}});
  EXPECT_EQ(request->costs.boundaries, std::vector<BoundaryCosts>{BoundaryCosts{}});
  EXPECT_EQ(request->memory.stages, std::vector<StageMemory>{StageMemory{}});
  EXPECT_FALSE(request->memory.limit.has_value());
  EXPECT_EQ(request->strategy, "1f1b");
}

TEST(ProtoIoTest, CostModelFromJsonKeepsListedFieldsAndDefaultsTheRest) {
  const StatusOr<CostModel> costs = ParseCostModel(
      R"({"stages": [{"forward": 2, "backward": 4}, {"forward": 3}], "time_unit": "us"})",
      ProtoFormat::kJson);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  // Inside a listed entry, unset fields are zeros, except that B and its I/W split default
  // to each other as on the command line.
  EXPECT_EQ(
      costs->stages,
      (std::vector<StageCosts>{
          {.forward = 2, .backward = 4, .backward_input = 2, .backward_weight = 2, .overlap = 0},
          {.forward = 3, .backward = 0, .backward_input = 0, .backward_weight = 0, .overlap = 0},
      }));
  EXPECT_EQ(costs->boundaries, std::vector<BoundaryCosts>{BoundaryCosts{}});
}

// A memory model's unit is read as the model's MemoryUnit: "bytes", or empty; anything else
// is refused naming the field, in a cost file and in a request.
TEST(ProtoIoTest, MemoryUnitIsBytesOrTheDefaultAndNothingElse) {
  const StatusOr<CostModel> bytes =
      ParseCostModel("memory { unit: \"bytes\" static_per_rank: 1024 }", ProtoFormat::kText);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  ASSERT_TRUE(bytes->memory.has_value());
  EXPECT_EQ(bytes->memory->unit, MemoryUnit::kBytes);
  const StatusOr<std::string> written = SerializeCostModel(*bytes, ProtoFormat::kText);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_NE(written->find("unit: \"bytes\""), std::string::npos) << *written;
  const StatusOr<CostModel> plain = ParseCostModel("memory { }", ProtoFormat::kText);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->memory->unit, MemoryUnit::kModel);

  const std::string expected =
      "'kb' is not a memory unit (\"bytes\", or empty for microbatch activations)";
  EXPECT_EQ(ParseCostModel("memory { unit: \"kb\" }", ProtoFormat::kText).status().message(),
            "cost file: memory.unit: " + expected);
  EXPECT_EQ(ParseRequest("topology { ranks: 2 microbatches: 2 } strategy: \"1f1b\" "
                         "memory { unit: \"kb\" }",
                         ProtoFormat::kText)
                .status()
                .message(),
            "request file: memory.unit: " + expected);
}

// Empty text is a hand-written file with nothing in it; empty binary records no kind
// (file_kind_test.cc).
TEST(ProtoIoTest, EmptyCostModelIsTheDefaultModel) {
  {
    const StatusOr<CostModel> costs = ParseCostModel("", ProtoFormat::kText);
    ASSERT_TRUE(costs.ok()) << costs.status().message();
    EXPECT_EQ(*costs, CostModel{});
  }
  const StatusOr<CostModel> costs = ParseCostModel("{}", ProtoFormat::kJson);
  ASSERT_TRUE(costs.ok()) << costs.status().message();
  EXPECT_EQ(*costs, CostModel{});
}

TEST(ProtoIoTest, UnspecifiedTimelineSourceIsSimulated) {
  const StatusOr<Timeline> timeline =
      ParseTimeline("ranks { rank: 0 busy: 2 }\n", ProtoFormat::kText);
  ASSERT_TRUE(timeline.ok()) << timeline.status().message();
  EXPECT_EQ(timeline->source, TimelineSource::kSimulated);
  ASSERT_EQ(timeline->ranks.size(), 1u);
  EXPECT_EQ(timeline->ranks[0].busy, 2);
}

// JSON has one zero: a -0 read from a text (or binary) file must come out as 0, or writing it
// as JSON and reading that back would change the file (found by the request_file fuzzer;
// its input is fuzz/corpus/request_file/regression-negative-zero.txtpb).
TEST(ProtoIoTest, NegativeZeroReadsAsZero) {
  const StatusOr<CostModel> text = ParseCostModel(
      "stages { forward: -0 backward: 2 }\nboundaries { latency: -0.0 }\n", ProtoFormat::kText);
  ASSERT_TRUE(text.ok()) << text.status().message();
  ASSERT_EQ(text->stages.size(), 1u);
  EXPECT_FALSE(std::signbit(text->stages[0].forward));
  ASSERT_EQ(text->boundaries.size(), 1u);
  EXPECT_FALSE(std::signbit(text->boundaries[0].latency));

  // A -0.0 the program computed is written in binary, where it keeps its sign bit.
  CostModel negative;
  negative.stages = {StageCosts{.forward = -0.0, .backward = 2}};
  const StatusOr<std::string> binary = SerializeCostModel(negative, ProtoFormat::kBinary);
  ASSERT_TRUE(binary.ok()) << binary.status().message();
  const StatusOr<CostModel> read = ParseCostModel(*binary, ProtoFormat::kBinary);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->stages.size(), 1u);
  EXPECT_FALSE(std::signbit(read->stages[0].forward));

  const StatusOr<std::string> json = SerializeCostModel(*text, ProtoFormat::kJson);
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(json->find("-0"), std::string::npos) << *json;
}

TEST(ProtoIoTest, DetectsFormatFromNameThenContent) {
  EXPECT_EQ(DetectProtoFormat("plan.pb", "{"), ProtoFormat::kBinary);
  EXPECT_EQ(DetectProtoFormat("plan.bin", ""), ProtoFormat::kBinary);
  EXPECT_EQ(DetectProtoFormat("plan.textproto", "{"), ProtoFormat::kText);
  EXPECT_EQ(DetectProtoFormat("plan.txtpb", ""), ProtoFormat::kText);
  EXPECT_EQ(DetectProtoFormat("plan.pbtxt", ""), ProtoFormat::kText);
  EXPECT_EQ(DetectProtoFormat("dir/Plan.JSON", "programs {}"), ProtoFormat::kJson);
  EXPECT_EQ(DetectProtoFormat("-", "  \n{\"programs\": []}"), ProtoFormat::kJson);
  EXPECT_EQ(DetectProtoFormat("plan", "programs { rank: 0 }\n"), ProtoFormat::kText);
  EXPECT_EQ(DetectProtoFormat("plan", std::string("\x0a\x02\x08\x01", 4)), ProtoFormat::kBinary);
  const StatusOr<std::string> binary = SerializePlan(MakePlan(), ProtoFormat::kBinary);
  ASSERT_TRUE(binary.ok());
  EXPECT_EQ(DetectProtoFormat("", *binary), ProtoFormat::kBinary);
  const StatusOr<std::string> json = SerializePlan(MakePlan(), ProtoFormat::kJson);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(DetectProtoFormat("", *json), ProtoFormat::kJson);
  const StatusOr<std::string> text = SerializePlan(MakePlan(), ProtoFormat::kText);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(DetectProtoFormat("", *text), ProtoFormat::kText);
}

// ---------------------------------------------------------------------------------------------
// Parse errors: each names what was parsed, then where (line/column or field path), then why.

enum class Parsed : uint8_t { kPlan, kRequest, kCostModel, kTimeline, kTimelineFile, kProfile };

struct ParseErrorCase {
  std::string name;
  Parsed parsed;
  ProtoFormat format;
  std::string input;
  std::string expected;
};

Status ParseStatus(const ParseErrorCase& c) {
  switch (c.parsed) {
    case Parsed::kPlan:
      return ParsePlan(c.input, c.format).status();
    case Parsed::kRequest:
      return ParseRequest(c.input, c.format).status();
    case Parsed::kCostModel:
      return ParseCostModel(c.input, c.format).status();
    case Parsed::kTimeline:
      return ParseTimeline(c.input, c.format).status();
    case Parsed::kTimelineFile:
      return ParseTimelineFile(c.input, c.format).status();
    case Parsed::kProfile:
      return ParseProfile(c.input, c.format).status();
  }
  return Status::Ok();
}

// A plan text with a valid request for 2 ranks x 2 stages x 2 microbatches.
std::string PlanText(const std::string& programs) {
  return "request { topology { ranks: 2 stages_per_rank: 2 microbatches: 2 } }\n" + programs;
}

const std::string kRank0 = "programs { rank: 0 actions { kind: FORWARD } }\n";

class ProtoParseErrorTest : public ::testing::TestWithParam<ParseErrorCase> {};

TEST_P(ProtoParseErrorTest, NamesTheProblem) {
  const Status status = ParseStatus(GetParam());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ProtoParseErrorTest,
    ::testing::Values(
        ParseErrorCase{"TextMissingColon", Parsed::kCostModel, ProtoFormat::kText,
                       "stages {\n  forward: 1\n  backward 2\n}\n",
                       "cost file: line 3, column 12: Expected \":\", found \"2\"."},
        // For unknown names protobuf's column points just past the name.
        ParseErrorCase{"TextUnknownField", Parsed::kCostModel, ProtoFormat::kText,
                       "stages {\n  fwd: 1\n}\n",
                       "cost file: line 2, column 6: Message type \"pipeplan.v1.StageCosts\" has "
                       "no field named \"fwd\"."},
        ParseErrorCase{"TextUnknownEnumValue", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs {\n  rank: 0\n  actions { kind: FWD }\n}\n"),
                       "plan file: line 4, column 23: Unknown enumeration value of \"FWD\" for "
                       "field \"kind\"."},
        ParseErrorCase{"JsonWrongType", Parsed::kRequest, ProtoFormat::kJson,
                       R"({"topology": {"ranks": "four"}})",
                       "request file: (topology.ranks): invalid value \"four\" for type "
                       "TYPE_INT32"},
        ParseErrorCase{"JsonUnknownField", Parsed::kCostModel, ProtoFormat::kJson,
                       R"({"stages": [{"fwd": 1}]})",
                       "cost file: (stages[0]) fwd: Cannot find field."},
        ParseErrorCase{"JsonSyntaxGivesLineAndColumn", Parsed::kCostModel, ProtoFormat::kJson,
                       "{\n  \"stages\": [\n    {\"forward\": 1 \"backward\": 2}\n  ]\n}\n",
                       "cost file: line 3, column 19: Expected , or } after key:value pair."},
        ParseErrorCase{"JsonTruncated", Parsed::kCostModel, ProtoFormat::kJson,
                       "{\"stages\": ", "cost file: Unexpected end of string. Expected a value."},
        ParseErrorCase{"JsonRootNotAnObject", Parsed::kTimeline, ProtoFormat::kJson, "[1]",
                       "timeline file: Root element must be a message."},
        ParseErrorCase{"BinaryGarbage", Parsed::kPlan, ProtoFormat::kBinary,
                       std::string("\xff\xff\xff garbage", 12),
                       "plan file: not a valid binary pipeplan.v1.Plan"},
        ParseErrorCase{
            "UnspecifiedActionKind", Parsed::kPlan, ProtoFormat::kText,
            PlanText(kRank0 + "programs { rank: 1 actions { kind: FORWARD stage: 1 }\n"
                              "  actions { kind: BACKWARD stage: 1 } actions { stage: 1 } }\n"),
            "plan file: programs[1].actions[2].kind: unspecified action kind"},
        ParseErrorCase{"UnknownActionKindNumber", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: 99 } }\n"
                                "programs { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].kind: unknown action kind 99"},
        ParseErrorCase{"NegativeRanks", Parsed::kRequest, ProtoFormat::kText,
                       "topology { ranks: -2 microbatches: 4 }\n",
                       "request file: topology.ranks: must be >= 1, got -2"},
        ParseErrorCase{"MissingMicrobatches", Parsed::kRequest, ProtoFormat::kJson,
                       R"({"topology": {"ranks": 2}})",
                       "request file: topology.microbatches: must be >= 1, got 0"},
        ParseErrorCase{"NegativeStagesPerRank", Parsed::kPlan, ProtoFormat::kText,
                       "request { topology { ranks: 1 stages_per_rank: -1 microbatches: 1 } }\n",
                       "plan file: request.topology.stages_per_rank: must be >= 0 (0 means the "
                       "strategy's default), "
                       "got -1"},
        ParseErrorCase{"TooManyStages", Parsed::kRequest, ProtoFormat::kText,
                       "topology { ranks: 65536 stages_per_rank: 65536 microbatches: 1 }\n",
                       "request file: topology.stages_per_rank: ranks * stages_per_rank = "
                       "4294967296 stages is too many"},
        ParseErrorCase{"NegativeGroupSize", Parsed::kRequest, ProtoFormat::kText,
                       "topology { ranks: 2 microbatches: 4 }\n"
                       "options { microbatch_group_size: -2 }\n",
                       "request file: options.microbatch_group_size: must be >= 0 (0 means P), "
                       "got -2"},
        ParseErrorCase{"UnknownPlacementNumber", Parsed::kRequest, ProtoFormat::kText,
                       "topology { ranks: 2 microbatches: 4 placement: 7 }\n",
                       "request file: topology.placement: unknown placement 7"},
        ParseErrorCase{"NegativeMicrobatch", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: FORWARD microbatch: -1 } }\n"
                                "programs { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].microbatch: must be >= 0, got -1"},
        ParseErrorCase{
            "NegativePeer", Parsed::kPlan, ProtoFormat::kText,
            PlanText(kRank0 + "programs { rank: 1 actions { kind: RECV_F stage: 1 peer: -1 } }\n"),
            "plan file: programs[1].actions[0].peer: must be >= 0, got -1"},
        ParseErrorCase{"PeerOutOfRange", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: SEND_F peer: 2 } }\n"
                                "programs { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].peer: out of range 0..1, got 2"},
        ParseErrorCase{"StageOutOfRange", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: FORWARD stage: 4 } }\n"
                                "programs { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].stage: out of range 0..3, got 4"},
        ParseErrorCase{"MicrobatchOutOfRange", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: FORWARD microbatch: 2 } }\n"
                                "programs { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].microbatch: out of range 0..1, got 2"},
        ParseErrorCase{"OverlapWithOneSubAction", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: OVERLAP_F_B\n"
                                "  sub_actions { kind: FORWARD } } }\nprograms { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].sub_actions: an OVERLAP_F_B action "
                       "needs 2 sub-actions (forward, backward), got 1"},
        ParseErrorCase{
            "OverlapBackwardFirst", Parsed::kPlan, ProtoFormat::kText,
            PlanText("programs { rank: 0 actions { kind: OVERLAP_F_B\n"
                     "  sub_actions { kind: BACKWARD } sub_actions { kind: FORWARD } } }\n"
                     "programs { rank: 1 }\n"),
            "plan file: programs[0].actions[0].sub_actions[0].kind: expected FORWARD, "
            "got BACKWARD"},
        ParseErrorCase{"SubActionOfSubAction", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 0 actions { kind: OVERLAP_F_B\n"
                                "  sub_actions { kind: FORWARD sub_actions { kind: FORWARD } }\n"
                                "  sub_actions { kind: BACKWARD } } }\nprograms { rank: 1 }\n"),
                       "plan file: programs[0].actions[0].sub_actions[0].sub_actions: only "
                       "OVERLAP_F_B actions have sub-actions"},
        ParseErrorCase{
            "RollbackOnSend", Parsed::kPlan, ProtoFormat::kText,
            PlanText("programs { rank: 0 actions { kind: SEND_F peer: 1 rollback: true } }\n"
                     "programs { rank: 1 }\n"),
            "plan file: programs[0].actions[0].rollback: only RECV_F actions carry "
            "the rollback flag"},
        ParseErrorCase{"WrongNumberOfPrograms", Parsed::kPlan, ProtoFormat::kText, PlanText(kRank0),
                       "plan file: programs: expected 2 rank programs (request.topology.ranks), "
                       "got 1"},
        ParseErrorCase{"ProgramsOutOfOrder", Parsed::kPlan, ProtoFormat::kText,
                       PlanText("programs { rank: 1 }\nprograms { rank: 0 }\n"),
                       "plan file: programs[0].rank: expected 0 (programs are listed in rank "
                       "order), got 1"},
        ParseErrorCase{"PlanCostsDoNotFitTopology", Parsed::kPlan, ProtoFormat::kText,
                       "request { topology { ranks: 1 stages_per_rank: 4 microbatches: 1 }\n"
                       "  costs { stages {} stages {} stages {} } }\nprograms { rank: 0 }\n",
                       "plan file: request: cost model has 3 stage entries; expected 1 (uniform) "
                       "or 4"},
        ParseErrorCase{"PlanStaticByRankDoesNotFitTopology", Parsed::kPlan, ProtoFormat::kText,
                       "request { topology { ranks: 1 stages_per_rank: 1 microbatches: 1 }\n"
                       "  memory { static_by_rank: 1 static_by_rank: 2 } }\nprograms { rank: 0 }\n",
                       "plan file: request: memory.static_by_rank has 2 entries (one per rank of "
                       "the profiled run) but the plan has 1 ranks"},
        ParseErrorCase{"TimelineNegativeRank", Parsed::kTimeline, ProtoFormat::kJson,
                       R"({"ranks": [{"rank": 0}, {"rank": -1}]})",
                       "timeline file: ranks[1].rank: must be >= 0, got -1"},
        // Regressions (fuzzing, issue 7): text format took strings that are not UTF-8, and a
        // file read that way was written as a binary file that no longer read back.
        ParseErrorCase{"TextProvenanceNotUtf8", Parsed::kPlan, ProtoFormat::kText,
                       "provenance { options: \"P=2\\377\" }\n",
                       "plan file: provenance.options: not valid UTF-8 (protobuf strings must be "
                       "UTF-8)"},
        ParseErrorCase{"TextStrategyOverlongUtf8", Parsed::kRequest, ProtoFormat::kText,
                       "strategy: \"1f1b\\300\\200\"\n",
                       "request file: strategy: not valid UTF-8 (protobuf strings must be UTF-8)"},
        ParseErrorCase{"TextSurrogateInTimelinePlan", Parsed::kTimelineFile, ProtoFormat::kText,
                       "plan { provenance { strategy: \"\\355\\240\\200\" } }\n",
                       "timeline file: plan.provenance.strategy: not valid UTF-8 (protobuf "
                       "strings must be UTF-8)"},
        ParseErrorCase{"TextProfileSourcePastUnicode", Parsed::kProfile, ProtoFormat::kText,
                       "source: \"\\364\\220\\200\\200\"\n",
                       "profile file: source: not valid UTF-8 (protobuf strings must be UTF-8)"},
        ParseErrorCase{"TimelineDiscardedRunOfNoAction", Parsed::kTimeline, ProtoFormat::kText,
                       "ranks { rank: 0 actions { end: 1 } discarded { action_index: 1 } }\n",
                       "timeline file: ranks[0].discarded[0].action_index: 1 is not an action of "
                       "this rank (it has 1)"},
        ParseErrorCase{"TimelineStageStaticNegativeBytes", Parsed::kTimeline, ProtoFormat::kText,
                       "ranks { rank: 0 stage_static { stage: 0 bytes: 5 }\n"
                       "  stage_static { stage: 1 bytes: -5 } }\n",
                       "timeline file: ranks[0].stage_static[1].bytes: must be a finite number "
                       ">= 0, got -5"},
        ParseErrorCase{"TimelineStageStaticNegativeTargets", Parsed::kTimeline, ProtoFormat::kText,
                       "ranks { rank: 0 stage_static { stage: 0 bytes: 5 target_bytes: -1 } }\n",
                       "timeline file: ranks[0].stage_static[0].target_bytes: must be a finite "
                       "number >= 0, got -1"},
        ParseErrorCase{"TimelineStageStaticDataAboveItsBytes", Parsed::kTimeline,
                       ProtoFormat::kText,
                       "ranks { rank: 0 stage_static { stage: 0 bytes: 5 input_bytes: 4 "
                       "target_bytes: 2 } }\n",
                       "timeline file: ranks[0].stage_static[0]: input_bytes + target_bytes (6) "
                       "are above bytes (5), of which they are a part"},
        ParseErrorCase{"ProfileStageDataWithoutMicrobatches", Parsed::kProfile, ProtoFormat::kText,
                       "stages { memory { static_bytes: 10 input_bytes: 8 } }\n",
                       "profile file: stages[0].memory.microbatches: must be >= 1 where the stage "
                       "holds data, got 0"},
        ParseErrorCase{"ProfileStageDataAboveItsStatic", Parsed::kProfile, ProtoFormat::kText,
                       "stages { memory { static_bytes: 10 input_bytes: 8 target_bytes: 4 } }\n",
                       "profile file: stages[0].memory.input_bytes + stages[0].memory."
                       "target_bytes: 12 are above static_bytes 10 (the data are a part of "
                       "them)"},
        ParseErrorCase{"TimelineStageStaticNegativeStage", Parsed::kTimeline, ProtoFormat::kJson,
                       R"({"ranks": [{"rank": 0, "stage_static": [{"stage": -2, "bytes": 1}]}]})",
                       "timeline file: ranks[0].stage_static[0].stage: must be >= 0, got -2"},
        ParseErrorCase{"ProfileOwnStaticAboveTheRanks", Parsed::kProfile, ProtoFormat::kText,
                       "stages {} static_bytes: 10 own_static_bytes: 11\n",
                       "profile file: own_static_bytes[0]: 11 is above the rank's static_bytes "
                       "10 (it is a part of them)"},
        ParseErrorCase{"TimelineUnknownSource", Parsed::kTimeline, ProtoFormat::kText,
                       "source: 5\n", "timeline file: source: unknown timeline source 5"},
        ParseErrorCase{"TimelineFileNegativeTimeScale", Parsed::kTimelineFile, ProtoFormat::kText,
                       "seconds_per_unit: -0.5\n",
                       "timeline file: seconds_per_unit: must be a finite number > 0 (or 0 for "
                       "not recorded), got -0.5"},
        ParseErrorCase{"ProfileWithoutStages", Parsed::kProfile, ProtoFormat::kText,
                       "source: \"x\"\n", "profile file: stages: the profile has no stages"},
        ParseErrorCase{"ProfileQuantilesOutOfOrder", Parsed::kProfile, ProtoFormat::kJson,
                       R"({"stages": [{"forward": {"samples": 3, "median": 2, "min": 1,)"
                       R"( "max": 3, "p10": 1.5, "p90": 1.8}}]})",
                       "profile file: stages[0].forward: median 2 is above p90 1.8"},
        ParseErrorCase{"ProfileBoundaryCount", Parsed::kProfile, ProtoFormat::kText,
                       "stages {} stages {} stages {} boundaries {}\n",
                       "profile file: boundaries: expected 2 entries (one between each two of "
                       "the 3 stages), got 1"}),
    [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace pipeplan
