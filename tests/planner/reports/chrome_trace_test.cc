#include "pipeplan/reports/chrome_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <map>
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

// ---- A strict little JSON reader, so the test checks real structure, not substrings. ----

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  // Object members in file order. Two vectors, not pairs: std::pair needs a complete Json.
  std::vector<std::string> keys;
  std::vector<Json> values;

  const Json* Find(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &values[i];
    }
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  // Parses the whole text as one value; false on any syntax error or trailing garbage.
  bool Parse(Json& out) {
    if (!Value(out)) return false;
    SkipSpace();
    return pos_ == text_.size();
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool Value(Json& out) {
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') return Object(out);
    if (c == '[') return Array(out);
    if (c == '"') {
      out.type = Json::Type::kString;
      return String(out.string);
    }
    if (Literal("true")) {
      out.type = Json::Type::kBool;
      out.boolean = true;
      return true;
    }
    if (Literal("false")) {
      out.type = Json::Type::kBool;
      return true;
    }
    if (Literal("null")) return true;
    return Number(out);
  }
  bool Number(Json& out) {
    const size_t begin = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
            text_[pos_] == 'e' || text_[pos_] == 'E' || text_[pos_] == '+' || text_[pos_] == '-')) {
      ++pos_;
    }
    if (pos_ == begin) return false;
    const std::string token(text_.substr(begin, pos_ - begin));
    char* end = nullptr;
    out.type = Json::Type::kNumber;
    out.number = std::strtod(token.c_str(), &end);
    return end == token.c_str() + token.size();
  }
  bool String(std::string& out) {
    ++pos_;  // opening quote
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;  // raw control characters
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char escaped = text_[pos_++];
      switch (escaped) {
        case '"':
        case '\\':
        case '/':
          out += escaped;
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
        case 'f':
          break;
        case 'u':
          if (pos_ + 4 > text_.size()) return false;
          pos_ += 4;
          out += '?';
          break;
        default:
          return false;
      }
    }
    return false;
  }
  bool Array(Json& out) {
    out.type = Json::Type::kArray;
    ++pos_;
    if (Consume(']')) return true;
    do {
      out.array.emplace_back();
      if (!Value(out.array.back())) return false;
    } while (Consume(','));
    return Consume(']');
  }
  bool Object(Json& out) {
    out.type = Json::Type::kObject;
    ++pos_;
    if (Consume('}')) return true;
    do {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return false;
      std::string key;
      if (!String(key)) return false;
      if (!Consume(':')) return false;
      out.keys.push_back(std::move(key));
      out.values.emplace_back();
      if (!Value(out.values.back())) return false;
    } while (Consume(','));
    return Consume('}');
  }

  std::string_view text_;
  size_t pos_ = 0;
};

Json ParseOrFail(const std::string& text) {
  Json json;
  EXPECT_TRUE(JsonReader(text).Parse(json)) << text;
  return json;
}

// ---- Fixture: two ranks, hand-made times (not from the simulator). ----

using testing::AddRank;
using testing::Comm;
using testing::Compute;
using testing::Timed;
using Fixture = testing::HandMadePlan;

Fixture MakeFixture() {
  Fixture f;
  f.plan.request.topology = Topology{2, 1, 2, Placement::kLoop};
  f.plan.provenance.strategy = "hand \"made\"";
  using K = ActionKind;
  AddRank(f.plan, f.timeline,
          {
              {Compute(K::kForward, 0, 0), 0, 1},
              {Comm(K::kSendForward, 0, 0, 1), 1, 1.5},
              {Compute(K::kForward, 0, 1), 1, 2},
              {Comm(K::kSendForward, 0, 1, 1), 2, 2.5},
              {Comm(K::kRecvBackward, 0, 0, 1), 2, 4},  // overlaps the send above
              {Compute(K::kBackward, 0, 0), 4, 6},
              {Comm(K::kRecvBackward, 0, 1, 1), 6, 6},  // no wait: zero length
              {Compute(K::kBackwardInput, 0, 1), 6, 7},
              {Compute(K::kBackwardWeight, 0, 1), 7, 8},
          });
  AddRank(f.plan, f.timeline,
          {
              {Comm(K::kRecvForward, 1, 0, 0, /*rollback=*/true), 0, 1.5},
              {Compute(K::kForward, 1, 0), 1.5, 2.5},
              {Comm(K::kRecvForward, 1, 1, 0), 2.5, 2.5},
              {MakeOverlap(Compute(K::kForward, 1, 1), Compute(K::kBackward, 1, 0)), 2.5, 4},
              {Comm(K::kSendBackward, 1, 0, 0), 4, 4},
              {Compute(K::kBackward, 1, 1), 4, 6},
              {Comm(K::kSendBackward, 1, 1, 0), 6, 6},
              {Compute(K::kPostValidation, 1, 0), 6, 7},
          });
  f.timeline.metrics.makespan = 8;
  return f;
}

size_t CountActions(const Plan& plan) {
  size_t count = 0;
  for (const RankProgram& program : plan.programs) count += program.actions.size();
  return count;
}

std::vector<const Json*> EventsWithPhase(const Json& trace, std::string_view phase) {
  std::vector<const Json*> events;
  const Json* list = trace.Find("traceEvents");
  if (list == nullptr) return events;
  for (const Json& event : list->array) {
    const Json* ph = event.Find("ph");
    if (ph != nullptr && ph->string == phase) events.push_back(&event);
  }
  return events;
}

double NumberOf(const Json& object, std::string_view key) {
  const Json* value = object.Find(key);
  EXPECT_NE(value, nullptr) << key;
  if (value == nullptr) return -1;
  EXPECT_EQ(value->type, Json::Type::kNumber) << key;
  return value->number;
}

std::string StringOf(const Json& object, std::string_view key) {
  const Json* value = object.Find(key);
  EXPECT_NE(value, nullptr) << key;
  if (value == nullptr) return "";
  EXPECT_EQ(value->type, Json::Type::kString) << key;
  return value->string;
}

// The X event of (pid, name); fails the test if there is not exactly one.
const Json* FindEvent(const Json& trace, int pid, std::string_view name) {
  const Json* found = nullptr;
  int matches = 0;
  for (const Json* event : EventsWithPhase(trace, "X")) {
    if (NumberOf(*event, "pid") == pid && StringOf(*event, "name") == name) {
      found = event;
      ++matches;
    }
  }
  EXPECT_EQ(matches, 1) << "pid " << pid << " " << name;
  return found;
}

// (pid, tid) -> thread name from the metadata events.
std::map<std::pair<int, int>, std::string> ThreadNames(const Json& trace) {
  std::map<std::pair<int, int>, std::string> names;
  for (const Json* event : EventsWithPhase(trace, "M")) {
    if (StringOf(*event, "name") != "thread_name") continue;
    const int pid = static_cast<int>(NumberOf(*event, "pid"));
    const int tid = static_cast<int>(NumberOf(*event, "tid"));
    names[{pid, tid}] = StringOf(*event->Find("args"), "name");
  }
  return names;
}

TEST(ChromeTraceTest, IsValidJsonWithTraceEventsAndTimeUnit) {
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  ASSERT_EQ(trace.type, Json::Type::kObject);
  const Json* events = trace.Find("traceEvents");
  ASSERT_NE(events, nullptr);
  EXPECT_EQ(events->type, Json::Type::kArray);
  EXPECT_EQ(StringOf(trace, "displayTimeUnit"), "ms");
  // The provenance string with quotes survived escaping.
  EXPECT_EQ(StringOf(*trace.Find("otherData"), "strategy"), "hand \"made\"");
}

TEST(ChromeTraceTest, OneCompleteEventPerActionInProgramOrder) {
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  const std::vector<const Json*> events = EventsWithPhase(trace, "X");
  ASSERT_EQ(events.size(), CountActions(f.plan));
  ASSERT_EQ(events.size(), 17u);

  size_t next = 0;
  for (size_t r = 0; r < f.plan.programs.size(); ++r) {
    for (size_t i = 0; i < f.plan.programs[r].actions.size(); ++i, ++next) {
      const Action& action = f.plan.programs[r].actions[i];
      const ActionTiming& timing = f.timeline.ranks[r].actions[i];
      const Json& event = *events[next];
      for (const char* key : {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"}) {
        EXPECT_NE(event.Find(key), nullptr) << key;
      }
      EXPECT_EQ(StringOf(event, "name"), ToString(action));
      EXPECT_EQ(StringOf(event, "cat"), KindToken(action.kind));
      EXPECT_EQ(NumberOf(event, "pid"), static_cast<double>(r));
      EXPECT_DOUBLE_EQ(NumberOf(event, "ts"), timing.start);
      EXPECT_DOUBLE_EQ(NumberOf(event, "dur"), timing.end - timing.start);
      const double tid = NumberOf(event, "tid");
      if (IsComm(action.kind)) {
        EXPECT_GE(tid, 1) << ToString(action);
      } else {
        EXPECT_EQ(tid, 0) << ToString(action);  // compute and PV share the compute track
      }
    }
  }
}

// A measured step whose post-validation failed: the first run of a replayed compute action
// is an event of its own on the compute track; a discarded transfer is left out.
TEST(ChromeTraceTest, ADiscardedFirstRunIsAnEventOfItsOwn) {
  Fixture f = MakeFixture();
  ASSERT_FALSE(IsComm(f.plan.programs[0].actions[0].kind));
  ASSERT_TRUE(IsComm(f.plan.programs[0].actions[1].kind));
  f.timeline.ranks[0].discarded.push_back({.action_index = 0, .timing = {.start = 0, .end = 0.5}});
  f.timeline.ranks[0].discarded.push_back(
      {.action_index = 1, .timing = {.start = 0.5, .end = 0.6, .thread = kCommThread}});
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  const std::vector<const Json*> events = EventsWithPhase(trace, "X");
  ASSERT_EQ(events.size(), CountActions(f.plan) + 1);
  const Json& discarded = *events[f.plan.programs[0].actions.size()];
  EXPECT_EQ(StringOf(discarded, "name"), ToString(f.plan.programs[0].actions[0]) + " (discarded)");
  EXPECT_EQ(StringOf(discarded, "cat"), "discarded");
  EXPECT_EQ(NumberOf(discarded, "pid"), 0);
  EXPECT_EQ(NumberOf(discarded, "tid"), 0);
  EXPECT_DOUBLE_EQ(NumberOf(discarded, "dur"), 0.5);
}

TEST(ChromeTraceTest, ProcessAndThreadMetadata) {
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  std::map<int, std::string> process_names;
  for (const Json* event : EventsWithPhase(trace, "M")) {
    if (StringOf(*event, "name") != "process_name") continue;
    process_names[static_cast<int>(NumberOf(*event, "pid"))] =
        StringOf(*event->Find("args"), "name");
  }
  EXPECT_EQ(process_names, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));

  const auto threads = ThreadNames(trace);
  EXPECT_EQ(threads.at({0, 0}), "compute");
  EXPECT_EQ(threads.at({0, 1}), "comm");
  EXPECT_EQ(threads.at({1, 0}), "compute");
  EXPECT_EQ(threads.at({1, 1}), "comm");
}

TEST(ChromeTraceTest, ArgsCarryStageMicrobatchPeerRollback) {
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));

  const Json* recv = FindEvent(trace, 1, "1RECV_F0");
  ASSERT_NE(recv, nullptr);
  const Json& recv_args = *recv->Find("args");
  EXPECT_EQ(NumberOf(recv_args, "stage"), 1);
  EXPECT_EQ(NumberOf(recv_args, "microbatch"), 0);
  EXPECT_EQ(NumberOf(recv_args, "peer"), 0);
  ASSERT_NE(recv_args.Find("rollback"), nullptr);
  EXPECT_TRUE(recv_args.Find("rollback")->boolean);

  const Json* send = FindEvent(trace, 0, "0SEND_F1");
  ASSERT_NE(send, nullptr);
  EXPECT_EQ(NumberOf(*send->Find("args"), "peer"), 1);
  EXPECT_FALSE(send->Find("args")->Find("rollback")->boolean);

  const Json* backward = FindEvent(trace, 0, "0B0");
  ASSERT_NE(backward, nullptr);
  EXPECT_EQ(NumberOf(*backward, "ts"), 4);
  EXPECT_EQ(NumberOf(*backward, "dur"), 2);
  EXPECT_EQ(backward->Find("args")->Find("peer"), nullptr);  // compute has no peer

  const Json* overlap = FindEvent(trace, 1, "(1F1;1B0)OVERLAP_F_B");
  ASSERT_NE(overlap, nullptr);
  EXPECT_EQ(StringOf(*overlap, "cat"), "OVERLAP_F_B");
  EXPECT_EQ(StringOf(*overlap->Find("args"), "forward"), "1F1");
  EXPECT_EQ(StringOf(*overlap->Find("args"), "backward"), "1B0");

  const Json* pv = FindEvent(trace, 1, "1PV");
  ASSERT_NE(pv, nullptr);
  EXPECT_EQ(pv->Find("args")->Find("microbatch"), nullptr);  // PV has no microbatch
}

TEST(ChromeTraceTest, KeepsZeroLengthCommEvents) {
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  const Json* recv = FindEvent(trace, 0, "0RECV_B1");
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(NumberOf(*recv, "ts"), 6);
  EXPECT_EQ(NumberOf(*recv, "dur"), 0);
}

TEST(ChromeTraceTest, OverlappingCommWindowsGoToSeparateLanes) {
  // Rank 0: 0SEND_F1 runs [2, 2.5] while 0RECV_B0 waits [2, 4]. Partially overlapping slices on
  // one thread do not display, so the recv moves to a second comm lane.
  const Fixture f = MakeFixture();
  const Json trace = ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
  EXPECT_EQ(NumberOf(*FindEvent(trace, 0, "0SEND_F1"), "tid"), 1);
  EXPECT_EQ(NumberOf(*FindEvent(trace, 0, "0RECV_B0"), "tid"), 2);
  EXPECT_EQ(NumberOf(*FindEvent(trace, 0, "0RECV_B1"), "tid"), 1);
  EXPECT_EQ(ThreadNames(trace).at({0, 2}), "comm 2");
  EXPECT_EQ(ThreadNames(trace).count({1, 2}), 0u);  // rank 1 needs only one lane

  // No two events on one thread overlap partially.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> by_thread;
  for (const Json* event : EventsWithPhase(trace, "X")) {
    const double ts = NumberOf(*event, "ts");
    by_thread[{static_cast<int>(NumberOf(*event, "pid")),
               static_cast<int>(NumberOf(*event, "tid"))}]
        .emplace_back(ts, ts + NumberOf(*event, "dur"));
  }
  for (auto& [thread, spans] : by_thread) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first)
          << "pid " << thread.first << " tid " << thread.second;
    }
  }
}

TEST(ChromeTraceTest, IsDeterministic) {
  const Fixture f = MakeFixture();
  EXPECT_EQ(ExportChromeTrace(f.plan, f.timeline), ExportChromeTrace(f.plan, f.timeline));
  const Fixture g = MakeFixture();
  EXPECT_EQ(ExportChromeTrace(f.plan, f.timeline), ExportChromeTrace(g.plan, g.timeline));
}

TEST(ChromeTraceTest, EmptyPlanIsStillValid) {
  const Json trace = ParseOrFail(ExportChromeTrace(Plan{}, Timeline{}));
  ASSERT_NE(trace.Find("traceEvents"), nullptr);
  EXPECT_TRUE(trace.Find("traceEvents")->array.empty());
}

TEST(ChromeTraceTest, NonFiniteTimesStayValidJson) {
  Fixture f = MakeFixture();
  f.timeline.ranks[0].actions[0].start = std::numeric_limits<double>::quiet_NaN();
  f.timeline.ranks[0].actions[3].start = std::numeric_limits<double>::quiet_NaN();  // a comm
  f.timeline.metrics.makespan = std::numeric_limits<double>::infinity();
  ParseOrFail(ExportChromeTrace(f.plan, f.timeline));
}

}  // namespace
}  // namespace pipeplan
