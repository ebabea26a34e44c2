// What the fuzz targets share: the protobuf formats a file may come in, the size bound under
// which a target goes on from parsing to planning and simulating, small requests to plan, and
// checks that turn a broken invariant into a crash libFuzzer records with its input.
#pragma once

#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "pipeplan/formats/proto_io.h"
#include "pipeplan/model/timeline.h"
#include "pipeplan/model/topology.h"
#include "pipeplan/planner/make_plan.h"
#include "pipeplan/simulation/simulator.h"

#define PIPEPLAN_FUZZ_CHECK(condition) \
  ((condition) ? (void)0 : ::pipeplan::fuzz::InvariantFailed(#condition, "", __FILE__, __LINE__))
#define PIPEPLAN_FUZZ_CHECK_OK(status) \
  ::pipeplan::fuzz::CheckOk((status), #status, __FILE__, __LINE__)

namespace pipeplan::fuzz {

[[noreturn]] inline void InvariantFailed(const char* what, const std::string& detail,
                                         const char* file, int line) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s%s%s\n", file, line, what,
               detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

inline void CheckOk(const Status& status, const char* what, const char* file, int line) {
  if (!status.ok()) InvariantFailed(what, status.message(), file, line);
}

// A file's format follows its name, so each one may meet any bytes: targets try all three.
inline constexpr ProtoFormat kProtoFormats[] = {ProtoFormat::kBinary, ProtoFormat::kText,
                                                ProtoFormat::kJson};

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Planning and simulating take time in P * V * M; past this bound a target stops after the
// checks that come before any per-action work, so that every input takes milliseconds and the
// fuzzer keeps exploring. Large sizes are the scale benchmarks' job (bench/).
inline constexpr int64_t kMaxComputeCells = 512;

// V = 0 in a request means the strategy's default, at most 2.
inline bool SmallEnoughToPlan(const Topology& topology) {
  const int64_t stages_per_rank = topology.stages_per_rank == 0 ? 2 : topology.stages_per_rank;
  return topology.ranks > 0 && stages_per_rank > 0 && topology.microbatches > 0 &&
         topology.ranks * stages_per_rank * topology.microbatches <= kMaxComputeCells;
}

// A request with the default figures (F = I = W = 1, B = 2, no transfer cost), as the planner
// tests make them (tests/planner/test_support.h).
inline PlanRequest MakeRequest(std::string strategy, int ranks, int microbatches,
                               int stages_per_rank = 1) {
  PlanRequest request;
  request.strategy = std::move(strategy);
  request.topology.ranks = ranks;
  request.topology.microbatches = microbatches;
  request.topology.stages_per_rank = stages_per_rank;
  return request;
}

// What every timeline a command prints or writes holds: finite times, no action that ends
// before it starts, and a finite makespan >= 0.
inline void CheckTimeline(const Timeline& timeline) {
  PIPEPLAN_FUZZ_CHECK(std::isfinite(timeline.metrics.makespan) && timeline.metrics.makespan >= 0);
  for (const RankTimeline& rank : timeline.ranks) {
    for (const ActionTiming& action : rank.actions) {
      PIPEPLAN_FUZZ_CHECK(std::isfinite(action.start) && std::isfinite(action.end));
      PIPEPLAN_FUZZ_CHECK(action.start <= action.end);
    }
  }
}

// Whether `text` is one well-formed JSON document (simdjson, as the trace reader parses).
inline bool IsJson(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::dom::element document;
  return parser.parse(text.data(), text.size()).get(document) == simdjson::SUCCESS;
}

// What a parsed file must survive: written in every format it reads back, and writing that
// again gives the same bytes (a file pipeplan wrote is a file pipeplan reads, in any format).
template <typename T>
void CheckRoundTrip(const T& value, StatusOr<std::string> (*serialize)(const T&, ProtoFormat),
                    StatusOr<T> (*parse)(std::string_view, ProtoFormat)) {
  for (const ProtoFormat format : kProtoFormats) {
    const StatusOr<std::string> written = serialize(value, format);
    PIPEPLAN_FUZZ_CHECK_OK(written.status());
    const StatusOr<T> read = parse(*written, format);
    PIPEPLAN_FUZZ_CHECK_OK(read.status());
    const StatusOr<std::string> rewritten = serialize(*read, format);
    PIPEPLAN_FUZZ_CHECK(rewritten.ok() && *rewritten == *written);
  }
}

// 'pipeplan plan' (MakePlan) on a request, bounded in size (auto plans every strategy at V = 1, 2
// and 4, so it gets a smaller bound). A plan the planner builds must simulate.
inline void PlanAndSimulate(const PlanRequest& request) {
  if (!SmallEnoughToPlan(request.topology)) return;
  if (request.strategy == kAutoStrategy &&
      request.topology.ranks * request.topology.microbatches > kMaxComputeCells / 8) {
    return;
  }
  // No solver here: the solver-made strategies are refused, every other path plans.
  const StatusOr<Evaluated> planned = MakePlan(request, PlanOptions{});
  if (!planned.ok()) return;
  const StatusOr<Timeline> simulated = Simulate(planned->plan);
  PIPEPLAN_FUZZ_CHECK_OK(simulated.status());
  // The timeline handed on is the plan's. Figures near the largest double overflow to an
  // infinite step whose metrics hold NaN, never equal to themselves: compared where finite.
  if (std::isfinite(simulated->metrics.makespan)) {
    PIPEPLAN_FUZZ_CHECK(*simulated == planned->timeline);
  }
}

}  // namespace pipeplan::fuzz
