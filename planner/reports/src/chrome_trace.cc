#include "pipeplan/reports/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <string_view>
#include <vector>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

constexpr int kComputeTid = 0;
constexpr int kCommTid = 1;  // first comm lane; overlapping windows spill to kCommTid + 1, ...

// JSON has no inf/nan; null keeps the file loadable and makes the bad value visible.
std::string JsonNumber(double value) {
  return std::isfinite(value) ? FormatNumber(value) : std::string("null");
}

// Streams events as one JSON array, one event per line so traces diff well.
class TraceWriter {
 public:
  TraceWriter() { out_ = "{\"traceEvents\":["; }

  void Add(std::string_view event) {
    out_ += first_ ? "\n" : ",\n";
    out_ += event;
    first_ = false;
  }

  std::string Finish(std::string_view other_data) {
    out_ += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
    out_ += other_data;
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  std::string out_;
  bool first_ = true;
};

std::string Metadata(std::string_view name, int pid, int tid, std::string_view args) {
  std::string event = "{\"name\":\"";
  event += name;
  event += "\",\"ph\":\"M\",\"pid\":";
  event += std::to_string(pid);
  event += ",\"tid\":";
  event += std::to_string(tid);
  event += ",\"args\":{";
  event += args;
  event += "}}";
  return event;
}

std::string NameArg(std::string_view name) { return "\"name\":\"" + JsonEscape(name) + "\""; }

std::string SortArg(int index) { return "\"sort_index\":" + std::to_string(index); }

std::string ThreadName(int tid) {
  if (tid == kComputeTid) return "compute";
  if (tid == kCommTid) return "comm";
  return "comm " + std::to_string(tid - kCommTid + 1);
}

std::string ActionArgs(const Action& action) {
  std::string args = "\"stage\":" + std::to_string(action.stage.value);
  if (HasMicrobatch(action.kind)) {
    args += ",\"microbatch\":" + std::to_string(action.microbatch.value);
  }
  if (IsComm(action.kind)) {
    args += ",\"peer\":" + std::to_string(action.peer.value);
    args += action.rollback ? ",\"rollback\":true" : ",\"rollback\":false";
  }
  if (action.kind == ActionKind::kOverlapFB && action.sub_actions.size() == 2) {
    args += ",\"forward\":\"" + JsonEscape(ToString(action.sub_actions[0])) + "\"";
    args += ",\"backward\":\"" + JsonEscape(ToString(action.sub_actions[1])) + "\"";
  }
  return args;
}

// `discarded`: a first run a failed post-validation replaced ("0F3 (discarded)", category
// "discarded").
std::string CompleteEvent(const Action& action, const ActionTiming& timing, int pid, int tid,
                          bool discarded) {
  // Viewers reject negative durations; a negative one can only come from a broken timeline.
  const double duration = std::max(0.0, timing.end - timing.start);
  std::string event = "{\"name\":\"";
  event += JsonEscape(ToString(action));
  if (discarded) event += " (discarded)";
  event += "\",\"cat\":\"";
  event += discarded ? std::string_view("discarded") : KindToken(action.kind);
  event += "\",\"ph\":\"X\",\"pid\":";
  event += std::to_string(pid);
  event += ",\"tid\":";
  event += std::to_string(tid);
  event += ",\"ts\":";
  event += JsonNumber(timing.start);
  event += ",\"dur\":";
  event += JsonNumber(duration);
  event += ",\"args\":{";
  event += ActionArgs(action);
  event += "}}";
  return event;
}

// Trace viewers only show slices on one thread when they nest; Perfetto drops partially
// overlapping ones. Comm windows (a SEND in flight, a RECV waiting) can overlap, so each comm
// event goes to the first lane that is free at its start (interval partitioning, in start order).
// Returns the lane of each of `windows`; lane 0 is the usual "comm" thread.
std::vector<int> AssignCommLanes(const std::vector<ActionTiming>& windows) {
  std::vector<size_t> order(windows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // NaN would break the sort's ordering; such a broken window simply sorts last.
  const auto start_of = [&](size_t i) {
    return std::isnan(windows[i].start) ? std::numeric_limits<double>::infinity()
                                        : windows[i].start;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return start_of(a) < start_of(b); });
  std::vector<int> lanes(windows.size(), 0);
  std::vector<double> lane_end;
  for (const size_t index : order) {
    const ActionTiming& window = windows[index];
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > window.start) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(window.end);
    lane_end[lane] = std::max(window.start, window.end);
    lanes[index] = static_cast<int>(lane);
  }
  return lanes;
}

void AddRank(const RankProgram& program, const RankTimeline& rank_timeline, int pid,
             TraceWriter& writer) {
  const size_t count = std::min(program.actions.size(), rank_timeline.actions.size());

  std::vector<size_t> comm_indices;
  std::vector<ActionTiming> comm_windows;
  for (size_t i = 0; i < count; ++i) {
    if (!IsComm(program.actions[i].kind)) continue;
    comm_indices.push_back(i);
    comm_windows.push_back(rank_timeline.actions[i]);
  }
  const std::vector<int> lanes = AssignCommLanes(comm_windows);
  const int num_lanes = lanes.empty() ? 1 : *std::max_element(lanes.begin(), lanes.end()) + 1;

  writer.Add(Metadata("process_name", pid, 0, NameArg("rank " + std::to_string(pid))));
  writer.Add(Metadata("process_sort_index", pid, 0, SortArg(pid)));
  for (int tid = kComputeTid; tid < kCommTid + num_lanes; ++tid) {
    writer.Add(Metadata("thread_name", pid, tid, NameArg(ThreadName(tid))));
    writer.Add(Metadata("thread_sort_index", pid, tid, SortArg(tid)));
  }

  // Events in program order; the comm lane of each comm action was fixed above.
  size_t next_comm = 0;
  for (size_t i = 0; i < count; ++i) {
    const Action& action = program.actions[i];
    int tid = kComputeTid;  // compute and PV run on the compute stream
    if (IsComm(action.kind)) tid = kCommTid + lanes[next_comm++];
    writer.Add(CompleteEvent(action, rank_timeline.actions[i], pid, tid, /*discarded=*/false));
  }
  // Compute only: a discarded transfer's window would need a lane of its own.
  for (const DiscardedRun& run : rank_timeline.discarded) {
    if (run.action_index >= program.actions.size()) continue;
    const Action& action = program.actions[run.action_index];
    if (IsComm(action.kind)) continue;
    writer.Add(CompleteEvent(action, run.timing, pid, kComputeTid, /*discarded=*/true));
  }
}

std::string OtherData(const Plan& plan, const Timeline& timeline) {
  std::string data = "{\"strategy\":\"" + JsonEscape(plan.provenance.strategy) + "\"";
  data += ",\"options\":\"" + JsonEscape(plan.provenance.options) + "\"";
  data += ",\"tool_version\":\"" + JsonEscape(plan.provenance.tool_version) + "\"";
  data += ",\"source\":\"";
  data += TimelineSourceName(timeline.source);
  data += "\",\"makespan\":" + JsonNumber(timeline.metrics.makespan) + "}";
  return data;
}

}  // namespace

std::string ExportChromeTrace(const Plan& plan, const Timeline& timeline) {
  TraceWriter writer;
  // Programs and timelines are index-aligned; a shorter side simply ends the rank early.
  const size_t num_ranks = std::min(plan.programs.size(), timeline.ranks.size());
  for (size_t r = 0; r < num_ranks; ++r) {
    AddRank(plan.programs[r], timeline.ranks[r], static_cast<int>(r), writer);
  }
  return writer.Finish(OtherData(plan, timeline));
}

}  // namespace pipeplan
