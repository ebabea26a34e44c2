// ParseTorchTrace on hand-written traces in Kineto's layout (export_chrome_trace): what it
// keeps of PP: ranges, steps, kernels and memory, and the errors for traces it cannot read.
#include "pipeplan/formats/torch_trace.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace pipeplan {
namespace {

// Kineto's layout, as torch 2.11 writes it: host ranges on the process's threads, device
// events under pid 0 with the stream as tid, launches and kernels joined by "correlation".
constexpr char kGpuTrace[] = R"({
  "schemaVersion": 1,
  "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 2},
  "baseTimeNanoseconds": 1790857026000000000,
  "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 9, "tid": 9,
     "ts": 1000.0, "dur": 500.0, "args": {"External id": 1}},
    {"ph": "X", "cat": "user_annotation", "name": "PP:1F0", "pid": 9, "tid": 9,
     "ts": 1010.0, "dur": 40.0, "args": {"External id": 2}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 9, "tid": 9,
     "ts": 1020.5, "dur": 10.0},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
     "ts": 1021.0, "dur": 3.0, "args": {"correlation": 77}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
     "ts": 1030.0, "dur": 100.0, "args": {"correlation": 77}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "PP:1F0", "pid": 0, "tid": 7,
     "ts": 1030.0, "dur": 100.0, "args": {"External id": 2}},
    {"ph": "X", "cat": "user_annotation", "name": "PP:1B0", "pid": 9, "tid": 9,
     "ts": 1060.0, "dur": 50.0, "args": {"External id": 3}},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 9, "tid": 12,
     "ts": 1070.0, "dur": 2.0, "args": {"correlation": 78}},
    {"ph": "X", "cat": "kernel", "name": "gemm_backward", "pid": 0, "tid": 7,
     "ts": 1140.0, "dur": 200.0, "args": {"correlation": 78}},
    {"ph": "X", "cat": "user_annotation", "name": "PP:1REDUCE_GRAD", "pid": 9, "tid": 9,
     "ts": 1120.0, "dur": 5.0},
    {"ph": "X", "cat": "user_annotation", "name": "PP:1SEND_B0", "pid": 9, "tid": 9,
     "ts": 1130.0, "dur": 5.0},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 9, "tid": 9,
     "ts": 1025.0, "args": {"Total Reserved": 4096, "Total Allocated": 2048, "Bytes": 1024,
                            "Device Id": 0, "Device Type": 1}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 9, "tid": 9,
     "ts": 1015.0, "args": {"Total Allocated": 512, "Bytes": 512, "Device Type": 0}}
  ]
})";

TEST(TorchTrace, KeepsActionsStepsDeviceSpansAndMemory) {
  const StatusOr<TorchTrace> trace = ParseTorchTrace(kGpuTrace);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->rank, 1);
  EXPECT_EQ(trace->world_size, 2);
  EXPECT_EQ(trace->backend, "nccl");
  EXPECT_EQ(trace->base_nanoseconds, 1790857026000000000);
  ASSERT_EQ(trace->steps.size(), 1u);
  EXPECT_EQ(trace->steps[0].number, 4);
  EXPECT_EQ(trace->origin_microseconds, 1000);  // times count from the first event
  EXPECT_EQ(trace->steps[0].start, 0.0);
  EXPECT_EQ(trace->steps[0].end, 500.0);
  EXPECT_EQ(trace->skipped_bookkeeping, 1);  // 1REDUCE_GRAD

  ASSERT_EQ(trace->actions.size(), 3u);
  const TraceAction& f = trace->actions[0];
  EXPECT_EQ(f.token, "1F0");
  EXPECT_EQ(f.action.kind, ActionKind::kForward);
  EXPECT_EQ(f.action.stage.value, 1);
  EXPECT_EQ(f.start, 10.0);
  EXPECT_EQ(f.end, 50.0);
  EXPECT_EQ(f.work_start, 20.5);  // the first operator inside it
  EXPECT_EQ(f.device_start, 30.0);
  EXPECT_EQ(f.device_end, 130.0);
  // B's kernel was launched from another thread (autograd's): still B's.
  const TraceAction& b = trace->actions[1];
  EXPECT_EQ(b.token, "1B0");
  EXPECT_EQ(b.work_start, 110.0);  // no operator of its own thread inside it: its end
  EXPECT_EQ(b.device_start, 140.0);
  EXPECT_EQ(b.device_end, 340.0);
  const TraceAction& send = trace->actions[2];
  EXPECT_EQ(send.action.kind, ActionKind::kSendBackward);
  EXPECT_EQ(send.action.microbatch.value, 0);
  EXPECT_FALSE(send.device_start.has_value());
  EXPECT_EQ(send.event, 10);

  ASSERT_EQ(trace->memory.size(), 2u);  // by time
  EXPECT_EQ(trace->memory[0].time, 15.0);
  EXPECT_FALSE(trace->memory[0].device);
  EXPECT_EQ(trace->memory[0].allocated, 512.0);
  EXPECT_TRUE(trace->memory[1].device);
  EXPECT_EQ(trace->memory[1].allocated, 2048.0);
  EXPECT_EQ(trace->memory[1].bytes, 1024.0);
}

TEST(TorchTrace, ACpuTraceHasHostRangesOnly) {
  const StatusOr<TorchTrace> trace = ParseTorchTrace(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:(0F1;0B0)OVERLAP_F_B", "pid": 1,
     "tid": 1, "ts": 5, "dur": 7}]})");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_FALSE(trace->rank.has_value());
  EXPECT_EQ(trace->base_nanoseconds, 0);
  ASSERT_EQ(trace->actions.size(), 1u);
  EXPECT_EQ(trace->actions[0].action.kind, ActionKind::kOverlapFB);
  EXPECT_EQ(trace->actions[0].work_start, 7.0);  // no operator inside it: its end
  EXPECT_FALSE(trace->actions[0].device_start.has_value());
}

std::string ErrorOf(const std::string& json) {
  const StatusOr<TorchTrace> trace = ParseTorchTrace(json);
  EXPECT_FALSE(trace.ok());
  return trace.ok() ? "" : trace.status().message();
}

TEST(TorchTrace, NotJsonIsRefused) {
  EXPECT_NE(ErrorOf("PK\x03\x04 not json").find("not a JSON Chrome trace"), std::string::npos);
  EXPECT_NE(ErrorOf("[1, 2]").find("expected an object with traceEvents"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"schemaVersion": 1})").find("no traceEvents"), std::string::npos);
}

TEST(TorchTrace, ATruncatedTraceNamesTheRankAndTheLastEventBegun) {
  const std::string whole = kGpuTrace;
  for (const size_t cut : {whole.find("PP:1B0") + 20, whole.find("PP:1B0") + 7}) {
    const std::string error = ErrorOf(whole.substr(0, cut));
    EXPECT_EQ(error,
              "the file ends in the middle of its JSON (truncated?): rank 1, the last event "
              "begun is 'PP:1B0'");
  }
  // Cut between two events, what is there is read and the break is placed after it.
  const std::string between = whole.substr(
      0, whole.find("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"PP:1B0\""));
  EXPECT_NE(ErrorOf(between + "]}").find("malformed or truncated after event 5"), std::string::npos)
      << ErrorOf(between + "]}");
}

TEST(TorchTrace, ATraceWithoutPipelineRangesSaysWhatIsMissing) {
  const std::string error = ErrorOf(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})");
  EXPECT_NE(error.find("no 'PP:' action ranges"), std::string::npos) << error;
  EXPECT_NE(error.find("torch.profiler"), std::string::npos) << error;
  EXPECT_NE(error.find("Schedule1F1B and ScheduleGPipe mark no actions"), std::string::npos)
      << error;
}

TEST(TorchTrace, AnUnknownActionTokenNamesTheEvent) {
  const std::string error = ErrorOf(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 1,
     "dur": 2},
    {"ph": "X", "cat": "user_annotation", "name": "PP:0X3", "pid": 1, "tid": 1, "ts": 4,
     "dur": 2}]})");
  EXPECT_NE(error.find("event 1 (PP:0X3): unknown action token"), std::string::npos) << error;
}

TEST(TorchTrace, ANegativeDurationIsRefused) {
  const std::string error = ErrorOf(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 1,
     "dur": -2}]})");
  EXPECT_NE(error.find("event 0 (PP:0F0): negative dur"), std::string::npos) << error;
}

// A trace written by another tool may put exponents in its numbers: "4.79e12" is a time, not 4 us
// and a fraction of 0.79e12.
TEST(TorchTrace, NumbersWithExponentsAreReadWhole) {
  const StatusOr<TorchTrace> trace = ParseTorchTrace(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 4.79e12,
     "dur": 2.7e1},
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F1", "pid": 1, "tid": 1,
     "ts": 4790000000027.5, "dur": 3E0}]})");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->actions.size(), 2u);
  EXPECT_EQ(trace->origin_microseconds, 4790000000000);
  EXPECT_EQ(trace->actions[0].start, 0.0);
  EXPECT_EQ(trace->actions[0].end, 27.0);
  EXPECT_EQ(trace->actions[1].start, 27.5);
  EXPECT_EQ(trace->actions[1].end, 30.5);
}

std::string EventWith(const std::string& field, const std::string& value) {
  std::string event = R"({"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1,
    "tid": 1, "ts": 10, "dur": 2, "args": {"External id": 3}})";
  const size_t at = event.find("\"" + field + "\": ");
  const size_t begin = at + field.size() + 4;
  const size_t end = event.find_first_of(",}", begin);
  return R"({"traceEvents": [)" + event.replace(begin, end - begin, value) + "]}";
}

// Out of range or not a number, each named with the field and the text as written (no 0
// silently read, and no "truncated?" for a file that is not).
TEST(TorchTrace, NumbersOutOfRangeOrNotNumbersAreNamed) {
  struct Case {
    std::string field, value, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"ts", "99999999999999999999", "ts is 99999999999999999999, not a time"},
           {"ts", "1e300", "ts is 1e300, not a time"},
           {"dur", "1e400", "dur is 1e400, not a finite number"},
           {"dur", "NaN", "dur is NaN, not a finite number"},
           {"tid", "1e30", "tid is 1e30, not an integer"},
           {"External id", "184467440737095516160", "args.External id is 184467440737095516160"},
       }) {
    const std::string error = ErrorOf(EventWith(c.field, c.value));
    EXPECT_NE(error.find("event 0 (PP:0F0): " + c.expected), std::string::npos)
        << c.field << " " << c.value << ": " << error;
    EXPECT_EQ(error.find("truncated"), std::string::npos) << error;
  }
  const std::string step = ErrorOf(R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#99999999999", "pid": 1, "tid": 1,
     "ts": 1, "dur": 9},
    {"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 2,
     "dur": 2}]})");
  EXPECT_NE(step.find("event 0 (ProfilerStep#99999999999): not a step number"), std::string::npos)
      << step;
}

TEST(TorchTrace, AByteOrderMarkIsSkipped) {
  const std::string json = "\xEF\xBB\xBF" + EventWith("dur", "2");
  const StatusOr<TorchTrace> trace = ParseTorchTrace(json);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->actions.size(), 1u);
}

// pipeplan_profiler.py's metadata: the live bytes at each step's end and each stage's
// parameters, in any order.
std::string WithMetadata(const std::string& metadata) {
  return "{" + metadata + R"(, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "PP:1F0", "pid": 1, "tid": 1, "ts": 2,
     "dur": 2}]})";
}

TEST(TorchTrace, TheProfilersMetadataIsRead) {
  const StatusOr<TorchTrace> trace = ParseTorchTrace(WithMetadata(
      R"("pipeplan_live_bytes": {"12": 5.5e6, "3": 4096},
         "pipeplan_stages": {"3": {"parameter_bytes": 800, "gradients_held": false},
                             "1": {"parameter_bytes": 1e3, "gradients_held": true}})"));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->live_bytes, (std::vector<std::pair<int, double>>{{3, 4096.0}, {12, 5.5e6}}));
  ASSERT_EQ(trace->stage_parameters.size(), 2u);
  EXPECT_EQ(trace->stage_parameters[0].stage, 1);
  EXPECT_EQ(trace->stage_parameters[0].parameter_bytes, 1000.0);
  EXPECT_TRUE(trace->stage_parameters[0].gradients_held);
  EXPECT_EQ(trace->stage_parameters[1].stage, 3);
  EXPECT_EQ(trace->stage_parameters[1].parameter_bytes, 800.0);
  EXPECT_FALSE(trace->stage_parameters[1].gradients_held);
}

TEST(TorchTrace, BadMetadataIsNamed) {
  struct Case {
    std::string metadata, expected;
  };
  for (const Case& c : std::vector<Case>{
           {R"("pipeplan_live_bytes": {"x": 1})", "pipeplan_live_bytes.x: the key is not a step"},
           {R"("pipeplan_live_bytes": {"2": -1})", "pipeplan_live_bytes.2 is -1, not bytes >= 0"},
           {R"("pipeplan_live_bytes": {"2": "a"})", "pipeplan_live_bytes.2 is \"a\", not a"},
           {R"("pipeplan_live_bytes": [1])", "pipeplan_live_bytes"},
           {R"("pipeplan_stages": {"-1": {}})", "pipeplan_stages.-1: the key is not a stage"},
           {R"("pipeplan_stages": {"0": {"parameter_bytes": 1e999}})",
            "pipeplan_stages.0.parameter_bytes is 1e999, not a finite number"},
           {R"("pipeplan_stages": {"0": {"gradients_held": 1}})",
            "pipeplan_stages.0.gradients_held is 1, not true or false"},
       }) {
    const std::string error = ErrorOf(WithMetadata(c.metadata));
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.metadata << ": " << error;
  }
}

}  // namespace
}  // namespace pipeplan
