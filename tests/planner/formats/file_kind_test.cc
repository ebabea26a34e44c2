// Files that say what they are: every file written records its kind and the format version,
// and every reader refuses another kind by name, before it reads the rest.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/planner/planner.h"

namespace pipeplan {
namespace {

struct KindCase {
  FileKind kind;
  std::function<StatusOr<std::string>(ProtoFormat)> write;
  std::function<Status(std::string_view, ProtoFormat)> read;
};

const Evaluated& Planned() {
  static const Evaluated planned = [] {
    PlanRequest request;
    request.strategy = "1f1b";
    request.topology = {.ranks = 2, .stages_per_rank = 1, .microbatches = 2};
    StatusOr<Evaluated> result = BuildAndSimulatePlan(request);
    EXPECT_TRUE(result.ok()) << result.status().message();
    return *std::move(result);
  }();
  return planned;
}

LayerCosts TwoLayers() {
  LayerCosts layers;
  layers.time_unit = "us";
  layers.layers.resize(2);
  layers.layers[0] = {.name = "embed",
                      .forward = 1.5,
                      .backward = 3,
                      .backward_input = std::nullopt,
                      .backward_weight = std::nullopt,
                      .activation = 64,
                      .freed_by_input = 0,
                      .parameter_bytes = 1024,
                      .output_bytes = 32};
  layers.layers[1] = {.name = "head",
                      .forward = 2,
                      .backward = std::nullopt,
                      .backward_input = 2.5,
                      .backward_weight = 1.5,
                      .activation = 0,
                      .freed_by_input = 0,
                      .parameter_bytes = 0,
                      .output_bytes = 0};
  return layers;
}

Profile OneStageProfile() {
  Profile profile;
  profile.source = "test";
  profile.steps = 1;
  profile.stages.resize(1);
  profile.stages[0].forward = {
      .samples = 1, .median = 2, .min = 2, .max = 2, .p10 = 2, .p90 = 2, .mean = 2};
  return profile;
}

std::vector<KindCase> Kinds() {
  return {
      {FileKind::kPlan, [](ProtoFormat f) { return SerializePlan(Planned().plan, f); },
       [](std::string_view d, ProtoFormat f) { return ParsePlan(d, f).status(); }},
      {FileKind::kRequest,
       [](ProtoFormat f) { return SerializeRequest(Planned().plan.request, f); },
       [](std::string_view d, ProtoFormat f) { return ParseRequest(d, f).status(); }},
      {FileKind::kCostModel,
       [](ProtoFormat f) { return SerializeCostModel(Planned().plan.request.costs, f); },
       [](std::string_view d, ProtoFormat f) { return ParseCostModel(d, f).status(); }},
      {FileKind::kTimeline,
       [](ProtoFormat f) {
         return SerializeTimelineFile({Planned().timeline, Planned().plan}, f);
       },
       [](std::string_view d, ProtoFormat f) { return ParseTimelineFile(d, f).status(); }},
      {FileKind::kProfile, [](ProtoFormat f) { return SerializeProfile(OneStageProfile(), f); },
       [](std::string_view d, ProtoFormat f) { return ParseProfile(d, f).status(); }},
      {FileKind::kLayerCosts, [](ProtoFormat f) { return SerializeLayerCosts(TwoLayers(), f); },
       [](std::string_view d, ProtoFormat f) { return ParseLayerCosts(d, f).status(); }},
  };
}

constexpr ProtoFormat kFormats[] = {ProtoFormat::kBinary, ProtoFormat::kText, ProtoFormat::kJson};

TEST(FileKindTest, NamesAreDistinct) {
  EXPECT_EQ(FileKindName(FileKind::kPlan), "plan");
  EXPECT_EQ(FileKindName(FileKind::kRequest), "request");
  EXPECT_EQ(FileKindName(FileKind::kCostModel), "cost model");
  EXPECT_EQ(FileKindName(FileKind::kTimeline), "timeline");
  EXPECT_EQ(FileKindName(FileKind::kProfile), "profile");
  EXPECT_EQ(FileKindName(FileKind::kLayerCosts), "layer costs");
}

TEST(FileKindTest, EveryFileRecordsItsKindAndVersionAndReadsBack) {
  for (const KindCase& c : Kinds()) {
    for (const ProtoFormat format : kFormats) {
      SCOPED_TRACE(std::string(FileKindName(c.kind)) + " format " +
                   std::to_string(static_cast<int>(format)));
      const StatusOr<std::string> data = c.write(format);
      ASSERT_TRUE(data.ok()) << data.status().message();
      const StatusOr<FileHeader> header = ReadFileHeader(*data, format);
      ASSERT_TRUE(header.ok()) << header.status().message();
      ASSERT_TRUE(header->kind.has_value());
      EXPECT_EQ(*header->kind, c.kind);
      EXPECT_EQ(header->format_version, kFileFormatVersion);
      EXPECT_TRUE(c.read(*data, format).ok());
    }
  }
}

TEST(FileKindTest, EveryReaderRefusesEveryOtherKindNamingBoth) {
  const std::vector<KindCase> kinds = Kinds();
  for (const KindCase& written : kinds) {
    for (const KindCase& reader : kinds) {
      if (written.kind == reader.kind) continue;
      for (const ProtoFormat format : kFormats) {
        const StatusOr<std::string> data = written.write(format);
        ASSERT_TRUE(data.ok());
        const Status status = reader.read(*data, format);
        EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
        EXPECT_EQ(status.message(), "is a " + std::string(FileKindName(written.kind)) +
                                        " file, not a " + std::string(FileKindName(reader.kind)) +
                                        " file");
      }
    }
  }
}

// The kind and version are the last fields of a binary file (fields 14 and 15, varints 1 and
// the kind): without them a binary file says nothing of what it is, and is refused.
TEST(FileKindTest, BinaryWithoutKindIsRefused) {
  const StatusOr<std::string> data = SerializePlan(Planned().plan, ProtoFormat::kBinary);
  ASSERT_TRUE(data.ok());
  const std::string tail = data->substr(data->size() - 4);
  ASSERT_EQ(tail, std::string("\x70\x01\x78\x01", 4));
  const std::string kindless = data->substr(0, data->size() - 4);
  const StatusOr<FileHeader> header = ReadFileHeader(kindless, ProtoFormat::kBinary);
  ASSERT_TRUE(header.ok());
  EXPECT_FALSE(header->kind.has_value());
  EXPECT_EQ(header->format_version, 0u);
  EXPECT_EQ(ParsePlan(kindless, ProtoFormat::kBinary).status().message(),
            "records no file kind, so it is not a plan file written by pipeplan (binary files "
            "from before file format version 1 are not read: write them again)");
}

// A kind this version does not know (a newer pipeplan's) is not read as any kind.
TEST(FileKindTest, AnUnknownKindIsRefused) {
  const StatusOr<std::string> data = SerializePlan(Planned().plan, ProtoFormat::kBinary);
  ASSERT_TRUE(data.ok());
  std::string unknown = *data;
  ASSERT_EQ(unknown.back(), '\x01');  // kind = PLAN, the last byte
  unknown.back() = '\x09';
  EXPECT_EQ(ParsePlan(unknown, ProtoFormat::kBinary).status().message(), "unknown file kind 9");
}

TEST(FileKindTest, HandWrittenTextAndJsonWithoutKindAreRead) {
  EXPECT_TRUE(ParseCostModel("stages { forward: 2 backward: 3 }\n", ProtoFormat::kText).ok());
  EXPECT_TRUE(ParseCostModel(R"({"stages": [{"forward": 2}]})", ProtoFormat::kJson).ok());
  EXPECT_TRUE(
      ParseRequest("strategy: \"1f1b\" topology { ranks: 2 microbatches: 4 }\n", ProtoFormat::kText)
          .ok());
}

// The layer costs file of the partition issue, as a user writes it: JSON without a header,
// figures left out are unknown (not 0), and read back in every format.
TEST(FileKindTest, AHandWrittenLayerCostsFileIsReadAndRoundTrips) {
  const StatusOr<LayerCosts> read = ParseLayerCosts(
      R"({"layers": [{"name": "embed", "forward": 1.5, "backward": 3, "activation": 64,
                      "parameter_bytes": 1024, "output_bytes": 32},
                     {"name": "head", "forward": 2, "backward_input": 2.5,
                      "backward_weight": 1.5}],
          "time_unit": "us"})",
      ProtoFormat::kJson);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, TwoLayers());
  for (const ProtoFormat format : kFormats) {
    const StatusOr<std::string> written = SerializeLayerCosts(*read, format);
    ASSERT_TRUE(written.ok());
    const StatusOr<LayerCosts> back = ParseLayerCosts(*written, format);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, *read);
  }
  // measure_layers' transients and a tied head, read and written back in every format.
  const StatusOr<LayerCosts> transients = ParseLayerCosts(
      R"({"layers": [{"name": "embed", "forward": 1, "backward": 1, "parameter_bytes": 64},
                     {"name": "head", "forward": 2, "backward": 4, "forward_transient": 8,
                      "backward_transient": 16, "input_transient": 12, "weight_transient": 4,
                      "parameter_bytes": 64}],
          "shared_parameters": [{"name": "embed.weight", "bytes": 64,
                                 "layers": ["embed", "head"]}]})",
      ProtoFormat::kJson);
  ASSERT_TRUE(transients.ok()) << transients.status().message();
  EXPECT_EQ(transients->shared_parameters,
            (std::vector<SharedParameter>{
                {.name = "embed.weight", .bytes = 64, .layers = {"embed", "head"}}}));
  const LayerFigures& head = transients->layers.back();
  EXPECT_EQ(head.forward_transient, 8);
  EXPECT_EQ(head.backward_transient, 16);
  EXPECT_EQ(head.input_transient, 12);
  EXPECT_EQ(head.weight_transient, 4);
  for (const ProtoFormat format : kFormats) {
    const StatusOr<std::string> written = SerializeLayerCosts(*transients, format);
    ASSERT_TRUE(written.ok());
    const StatusOr<LayerCosts> back = ParseLayerCosts(*written, format);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, *transients);
  }
  const StatusOr<LayerCosts> bad = ParseLayerCosts(
      R"({"layers": [{"name": "x", "forward": -1, "backward": 1}]})", ProtoFormat::kJson);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "layer costs file: layers[0] (x).forward: must be a finite number >= 0, got -1");
  const StatusOr<LayerCosts> none = ParseLayerCosts(R"({"layers": []})", ProtoFormat::kJson);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "layer costs file: layers: none given");
}

TEST(FileKindTest, AHandWrittenKindIsChecked) {
  const Status status =
      ParseRequest("kind: COST_MODEL\nstages { forward: 2 }\n", ProtoFormat::kText).status();
  EXPECT_EQ(status.message(), "is a cost model file, not a request file");
}

TEST(FileKindTest, ANewerFormatVersionIsRefused) {
  const Status status =
      ParseCostModel("format_version: 2\nkind: COST_MODEL\n", ProtoFormat::kText).status();
  EXPECT_EQ(status.message(),
            "written by a newer pipeplan (file format version 2; this one reads up to 1)");
}

TEST(FileKindTest, WhatIsNotProtobufHasNoHeader) {
  EXPECT_FALSE(ReadFileHeader("stages { forward: ", ProtoFormat::kText).ok());
  EXPECT_FALSE(ReadFileHeader("{\"stages\": [", ProtoFormat::kJson).ok());
  // Not protobuf: the kind check lets the full parse say where it fails.
  EXPECT_EQ(ParseCostModel("{\"stages\": [", ProtoFormat::kJson).status().message().substr(0, 11),
            "cost file: ");
}

}  // namespace
}  // namespace pipeplan
