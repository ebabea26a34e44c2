// The flags that describe a plan request, shared by plan, compare and import: topology
// (--ranks, --microbatches, --stages-per-rank, --microbatch-group-size), options
// (--post-validation), memory (--memory-limit) and costs (--costs FILE or --forward/
// --backward/--backward-input/--backward-weight/--overlap/--comm). Parsing only checks the
// command line (usage errors); loading reads the files the flags name (input errors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/app/flags.h"
#include "pipeplan/model/plan.h"

namespace pipeplan::app {

// --costs and the six duration flags.
std::vector<FlagSpec> CostFlagSpecs();
// --ranks, --microbatches, --stages-per-rank, --microbatch-group-size, --memory-limit,
// --post-validation, --runtime.
std::vector<FlagSpec> TopologyFlagSpecs();

struct CostFlags {
  std::optional<std::string> costs_file;  // --costs FILE
  std::optional<CostModel> costs_model;   // the same, given in memory (Python's costs=)
  CostModel from_flags;                   // the duration flags with their defaults
  bool any_given = false;                 // whether --costs or a duration flag was given
};

// The cost flags alone (import): ReadRequestValues, then the cost part of CheckRequestValues.
StatusOr<CostFlags> ParseCostFlags(const Flags& flags);
// The cost model the flags describe (reads --costs FILE).
StatusOr<CostModel> LoadCosts(const CostFlags& flags);

struct RequestFlags {
  std::optional<std::string> request_file;  // --request FILE: the whole request
  std::string strategy;                     // --strategy (plan only; may be "auto")
  int ranks = 0;
  int microbatches = 0;
  std::optional<int> stages_per_rank;
  int microbatch_group_size = 0;  // 0 = the strategy's default
  std::optional<double> memory_limit;
  bool memory_limit_in_bytes = false;  // given with a byte unit ("70GiB")
  bool post_validation = false;        // --post-validation
  Runtime runtime = Runtime::kAny;     // --runtime
  CostFlags costs;
};

enum class StrategyFlag : uint8_t {
  kRequired,  // plan: --strategy NAME, checked against the catalogue (or "auto")
  kNone,      // compare: every strategy
};

// A plan request's values as a front end received them, before any check: read from flags
// (ReadRequestValues) or given typed (torch.ops.pipeplan.plan). nullopt: not given.
struct RequestValues {
  std::optional<std::string> request_file;
  std::optional<std::string> strategy;
  std::optional<int64_t> ranks;
  std::optional<int64_t> microbatches;
  std::optional<int64_t> stages_per_rank;
  std::optional<int64_t> microbatch_group_size;
  std::optional<double> memory_limit;
  bool memory_limit_in_bytes = false;
  bool post_validation = false;
  std::optional<std::string> runtime;
  std::optional<std::string> costs_file;
  std::optional<CostModel> costs_model;  // a cost model in memory; named --costs as the file
  std::optional<double> forward;
  std::optional<double> backward;
  std::optional<double> backward_input;
  std::optional<double> backward_weight;
  std::optional<double> overlap;
  std::optional<double> comm;
  std::optional<double> receive_overhead;
};

// A memory amount as --memory-limit takes it: a plain number (the memory model's unit), or a
// number with a byte unit: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of
// 1000), in any case, e.g. "70GiB", "512 mib"; a bare K, M, G or T is refused as ambiguous. Returns
// the amount (in bytes where a unit was given) and whether it was in bytes; an unknown unit is an
// error naming the flag (a negative amount is refused with the other request values).
struct MemoryAmount {
  double value = 0.0;
  bool bytes = false;
};
StatusOr<MemoryAmount> ParseMemoryAmount(std::string_view text, std::string_view flag);
// The one memory limit of plan, compare, simulate and the torch op: a ParseMemoryAmount; a
// comma-separated list (a limit per rank, as partition takes) is refused saying so.
StatusOr<MemoryAmount> ParseMemoryLimit(std::string_view text, std::string_view flag);

// partition's limits in bytes: one amount for every rank, or comma-separated amounts one per
// rank ("40GiB,40GiB,38GiB,30GiB"); each a ParseMemoryAmount, > 0. Errors name the flag and,
// in a list, the rank.
StatusOr<std::vector<double>> ParseMemoryLimits(std::string_view text, std::string_view flag);

// --runtime NAME: one of RuntimeNames(); an unknown name is an error naming the flag.
StatusOr<Runtime> ParseRuntimeFlag(std::string_view name);

// The flags' values; only their syntax is checked (an integer, a finite number).
StatusOr<RequestValues> ReadRequestValues(const Flags& flags);

// The one check of a request's values, whoever read them; errors name the flags, so the CLI
// and the torch op say the same. --request excludes the other values; without it --ranks and
// --microbatches (and --strategy when required) must be given, counts >= 1 and durations and
// the memory limit >= 0.
// Durations: B defaults to I + W; when B is given, a missing I or W is B minus the other
// one, or B/2 when both are missing; nothing given means F=1, B=2, I=W=1. --overlap is the
// cost of one F&B overlap cell (StageCosts::overlap; must be > 0, left out it is F + B).
// --comm sets the uniform boundary latency, --receive-overhead its receive overhead. --costs
// excludes the duration flags.
StatusOr<RequestFlags> CheckRequestValues(const RequestValues& values, StrategyFlag strategy_flag);

// ReadRequestValues, then CheckRequestValues.
StatusOr<RequestFlags> ParseRequestFlags(const Flags& flags, StrategyFlag strategy_flag);

// The solver's budget, a number of seconds > 0 (checked here for every front end, the error
// naming the flag or argument `name` it came from).
Status CheckTimeLimit(double seconds, std::string_view name);

// --time-limit SEC (CheckTimeLimit); nullopt when not given.
StatusOr<std::optional<double>> ParseTimeLimitFlag(const Flags& flags);

// Reads --request FILE and --costs FILE. The returned request has topology, options, costs
// and memory set from the flags; the strategy is flags.strategy (empty for compare) and the
// placement and V are those of that strategy (V defaults to the smallest the strategy
// accepts; for "auto" V is --stages-per-rank or 1, the V the costs describe). With --request
// the file's request is returned as is.
StatusOr<PlanRequest> LoadRequest(const RequestFlags& flags);

// The planner's errors name the request's fields ("topology.stages_per_rank", the file's
// spelling); for a request given as flags (or the torch op's arguments: no request file) this
// names the flags instead ("--stages-per-rank"). A request read from a file keeps the names of
// its fields. Whole names only: "request.topology.ranks" of a plan file stays as it is.
std::string InFlagTerms(std::string message, const RequestFlags& flags);
Status InFlagTerms(const Status& status, const RequestFlags& flags);

// Reads and validates a plan file (binary, text or JSON, as DetectProtoFormat picks); errors
// start with the path.
StatusOr<Plan> LoadPlanFile(const std::string& path);
// The same without validation, for commands that check plans their own way ('run').
StatusOr<Plan> ReadPlanFile(const std::string& path);

}  // namespace pipeplan::app
