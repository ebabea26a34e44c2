// LayerCostsOfTraces on hand-written traces of marked layers: medians per layer in model
// order, activation from the allocator's totals, bytes from the metadata, and refusals.
#include "pipeplan/measurement/layer_trace.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "pipeplan/formats/torch_trace.h"

namespace pipeplan {
namespace {

// The pieces of a trace in Kineto's layout (CPU: host ranges and "[memory]" instants).
std::string Range(const std::string& name, double ts, double dur) {
  return R"({"ph": "X", "cat": "user_annotation", "name": ")" + name +
         R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(ts) + R"(, "dur": )" +
         std::to_string(dur) + "}";
}
std::string Forward(const std::string& layer, double ts, double dur) {
  return Range("pipeplan.layer.forward:" + layer, ts, dur);
}
std::string Backward(const std::string& layer, double ts, double dur) {
  return Range("pipeplan.layer.backward:" + layer, ts, dur);
}
std::string Memory(double ts, double total, double bytes) {
  return R"({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, )"
         R"("tid": 1, "ts": )" +
         std::to_string(ts) + R"(, "args": {"Total Allocated": )" + std::to_string(total) +
         R"(, "Bytes": )" + std::to_string(bytes) + R"(, "Device Type": 0}})";
}

std::string Trace(int rank, const std::vector<std::string>& events,
                  const std::string& metadata = "") {
  std::string json = R"({"distributedInfo": {"rank": )" + std::to_string(rank) +
                     R"(, "world_size": 2}, )" + metadata + R"("traceEvents": [)";
  for (size_t i = 0; i < events.size(); ++i) json += (i == 0 ? "" : ", ") + events[i];
  return json + "]}";
}

StatusOr<LayerTraceImport> Import(const std::vector<std::string>& traces) {
  std::vector<TraceFile> files;
  for (size_t r = 0; r < traces.size(); ++r) {
    StatusOr<TorchTrace> trace = ParseTorchTrace(traces[r], TraceContent::kLayers);
    if (!trace.ok()) return trace.status();
    files.push_back({"rank" + std::to_string(r) + ".json", *std::move(trace)});
  }
  return LayerCostsOfTraces(files);
}

// Three microbatches through two ranks: embed and blocks.0 on rank 0, blocks.1 and head on
// rank 1; each rank's backward ranges in the order autograd ran them.
std::vector<std::string> TwoRanks() {
  std::vector<std::string> rank0;
  std::vector<std::string> rank1;
  const double embed_f[] = {10, 14, 12};
  const double block0_f[] = {30, 20, 25};
  const double block0_b[] = {50, 40, 45};
  const double embed_b[] = {6, 4, 5};
  const double block1_f[] = {21, 22, 23};
  const double head_f[] = {7, 9, 8};
  const double head_b[] = {16, 18, 17};
  const double block1_b[] = {41, 43, 42};
  for (int m = 0; m < 3; ++m) {
    const double t = 1000.0 * m;
    rank0.push_back(Forward("embed", t, embed_f[m]));
    rank0.push_back(Forward("blocks.0", t + 100, block0_f[m]));
    rank0.push_back(Backward("blocks.0", t + 500, block0_b[m]));
    rank0.push_back(Backward("embed", t + 600, embed_b[m]));
    rank1.push_back(Forward("blocks.1", t + 200, block1_f[m]));
    rank1.push_back(Forward("head", t + 300, head_f[m]));
    rank1.push_back(Backward("head", t + 350, head_b[m]));
    rank1.push_back(Backward("blocks.1", t + 400, block1_b[m]));
  }
  return {Trace(0, rank0), Trace(1, rank1)};
}

TEST(LayerTrace, EachLayersMedianForwardAndBackwardInModelOrder) {
  const StatusOr<LayerTraceImport> imported = Import(TwoRanks());
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const LayerCosts& costs = imported->costs;
  EXPECT_EQ(costs.time_unit, "us");
  ASSERT_EQ(costs.layers.size(), 4u);
  const std::vector<std::pair<std::string, std::pair<double, double>>> expected = {
      {"embed", {12, 5}}, {"blocks.0", {25, 45}}, {"blocks.1", {22, 42}}, {"head", {8, 17}}};
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].first);
    EXPECT_EQ(costs.layers[i].name, expected[i].first);
    EXPECT_DOUBLE_EQ(*costs.layers[i].forward, expected[i].second.first);
    EXPECT_DOUBLE_EQ(*costs.layers[i].backward, expected[i].second.second);
    EXPECT_FALSE(costs.layers[i].backward_input.has_value());
    EXPECT_EQ(imported->counts[i].forwards, 3);
    EXPECT_EQ(imported->counts[i].backwards, 3);
  }
  // No memory events: the file plans time alone, and says so.
  EXPECT_FALSE(costs.HasMemory());
  ASSERT_FALSE(imported->notes.empty());
  EXPECT_NE(imported->notes[0].find("time only"), std::string::npos) << imported->notes[0];
}

TEST(LayerTrace, ActivationIsWhatTheForwardLeftAllocatedAndBytesComeFromTheMetadata) {
  // One forward of a: 256 bytes kept, 64 allocated and freed inside it, and an allocation
  // just before it (not its own). b keeps 100.
  const std::string trace =
      Trace(0,
            {Memory(5, 1000, 1000), Forward("a", 10, 5), Memory(11, 1256, 256),
             Memory(12, 1320, 64), Memory(13, 1256, -64), Backward("a", 40, 3), Forward("b", 20, 5),
             Memory(22, 1356, 100), Backward("b", 30, 3)},
            R"("pipeplan_layers": {"a": {"parameter_bytes": 4096, "output_bytes": 256}}, )");
  const StatusOr<LayerTraceImport> imported = Import({trace});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const LayerCosts& costs = imported->costs;
  ASSERT_EQ(costs.layers.size(), 2u);
  EXPECT_TRUE(costs.HasMemory());
  EXPECT_EQ(costs.layers[0].activation, 256);
  EXPECT_EQ(costs.layers[0].parameter_bytes, 4096);
  EXPECT_EQ(costs.layers[0].output_bytes, 256);
  EXPECT_EQ(costs.layers[1].activation, 100);
  EXPECT_EQ(costs.layers[1].parameter_bytes, 0);  // the metadata does not name b
  bool named = false;
  for (const std::string& note : imported->notes) {
    named = named || note.find("no parameter or output bytes of b ") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

TEST(LayerTrace, OnAGpuTraceALayerIsTimedByItsDeviceSpan) {
  // The host range launches for 5 us; its kernels run 80 us (Kineto's gpu_user_annotation).
  const std::string device =
      R"({"ph": "X", "cat": "gpu_user_annotation", "name": "pipeplan.layer.forward:x", )"
      R"("pid": 0, "tid": 7, "ts": 20, "dur": 80})";
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Forward("x", 10, 5), device, Backward("x", 200, 30)})});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_DOUBLE_EQ(*imported->costs.layers[0].forward, 80);
  EXPECT_DOUBLE_EQ(*imported->costs.layers[0].backward, 30);  // no device span: its host range
}

TEST(LayerTrace, ALayerOnTwoRanksIsOneLayerWithItsSamplesPooled) {
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Forward("x", 0, 10), Backward("x", 20, 30)}),
              Trace(1, {Forward("x", 0, 20), Backward("x", 30, 40), Forward("y", 100, 1),
                        Backward("y", 110, 1)})});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  ASSERT_EQ(imported->costs.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(*imported->costs.layers[0].forward, 15);
  EXPECT_DOUBLE_EQ(*imported->costs.layers[0].backward, 35);
  EXPECT_EQ(imported->counts[0].forwards, 2);
}

TEST(LayerTrace, AnInterleavedJobsLayersAreInTheOrderOfTheStagesThatRanThem) {
  // Interleaved 1F1B, P = 2, V = 2: rank 0 runs stages 0 and 2, rank 1 stages 1 and 3.
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Range("PP:0F0", 0, 20), Forward("a", 1, 10), Range("PP:2F0", 50, 20),
                        Forward("c", 51, 10), Backward("c", 100, 5), Backward("a", 200, 5)}),
              Trace(1, {Range("PP:1F0", 25, 20), Forward("b", 26, 10), Range("PP:3F0", 75, 20),
                        Forward("d", 76, 10), Backward("d", 90, 5), Backward("b", 150, 5)})});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  std::vector<std::string> order;
  for (const LayerFigures& layer : imported->costs.layers) order.push_back(layer.name);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(LayerTrace, ALayerWithoutABackwardGetsZeroAndANote) {
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Forward("mask", 0, 3), Forward("x", 5, 10), Backward("x", 20, 30)})});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_EQ(*imported->costs.layers[0].backward, 0);
  EXPECT_NE(imported->notes[0].find("no backward range of mask"), std::string::npos)
      << imported->notes[0];
}

TEST(LayerTrace, AJobThatSplitsTheBackwardIsRefusedNamingTheFileAndAction) {
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Range("PP:0F0", 0, 20), Forward("x", 1, 10), Range("PP:0I0", 30, 20),
                        Backward("x", 31, 10), Range("PP:0W0", 60, 10)})});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("rank0.json"), std::string::npos);
  EXPECT_NE(imported.status().message().find("PP:0I0"), std::string::npos)
      << imported.status().message();
}

TEST(LayerTrace, ABackwardBeforeAnyForwardIsNamed) {
  const StatusOr<LayerTraceImport> imported =
      Import({Trace(0, {Backward("x", 0, 10), Forward("x", 20, 30)})});
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find("layer 'x' has a backward range before"),
            std::string::npos)
      << imported.status().message();
}

TEST(LayerTrace, TracesWithoutLayerRangesSayHowToMarkThem) {
  const StatusOr<TorchTrace> trace =
      ParseTorchTrace(Trace(0, {Range("PP:0F0", 0, 20)}), TraceContent::kLayers);
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("layers=model"), std::string::npos)
      << trace.status().message();
  // A layer trace without PP ranges is still refused where a job's actions are needed.
  EXPECT_FALSE(ParseTorchTrace(Trace(0, {Forward("x", 0, 1)})).ok());
}

TEST(LayerTrace, BadLayerRangesAndMetadataAreNamed) {
  const StatusOr<TorchTrace> sideways =
      ParseTorchTrace(Trace(0, {Range("pipeplan.layer.sideways:x", 0, 1)}), TraceContent::kLayers);
  ASSERT_FALSE(sideways.ok());
  EXPECT_NE(sideways.status().message().find("event 0 (pipeplan.layer.sideways:x)"),
            std::string::npos)
      << sideways.status().message();
  const StatusOr<TorchTrace> unnamed =
      ParseTorchTrace(Trace(0, {Forward("", 0, 1)}), TraceContent::kLayers);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("no name"), std::string::npos);
  const StatusOr<TorchTrace> negative = ParseTorchTrace(
      Trace(0, {Forward("x", 0, 1)}, R"("pipeplan_layers": {"x": {"parameter_bytes": -1}}, )"),
      TraceContent::kLayers);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("pipeplan_layers.x.parameter_bytes"),
            std::string::npos)
      << negative.status().message();
}

}  // namespace
}  // namespace pipeplan
