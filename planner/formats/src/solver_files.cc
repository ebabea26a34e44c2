#include "pipeplan/formats/solver_files.h"

#include <sstream>
#include <string>

#include "pipeplan/model/text_format.h"

namespace pipeplan {
namespace {

void AppendList(std::string& out, const std::vector<int64_t>& values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

}  // namespace

std::string SolverInstanceJson(const SolverInstance& instance) {
  std::string out = "{\"version\":1,\"ranks\":" + std::to_string(instance.ranks);
  out += ",\"ops\":[";
  for (size_t i = 0; i < instance.ops.size(); ++i) {
    const SolverOp& op = instance.ops[i];
    if (i > 0) out += ',';
    out += "{\"name\":\"" + ToString(op.action) + "\",\"rank\":" + std::to_string(op.rank) +
           ",\"duration\":" + std::to_string(op.duration) +
           ",\"setup\":" + std::to_string(op.setup) + "}";
  }
  out += "],\"precedences\":[";
  for (size_t i = 0; i < instance.precedences.size(); ++i) {
    const SolverPrecedence& p = instance.precedences[i];
    if (i > 0) out += ',';
    AppendList(out, {p.before, p.after, p.delay});
  }
  out += "],\"holds\":[";
  for (size_t i = 0; i < instance.holds.size(); ++i) {
    const SolverHold& h = instance.holds[i];
    if (i > 0) out += ',';
    AppendList(out, {h.rank, h.from, h.to, h.amount});
  }
  out += "],\"capacity\":";
  if (instance.capacity.has_value()) {
    AppendList(out, *instance.capacity);
  } else {
    out += "null";
  }
  out += ",\"static\":";
  AppendList(out, instance.static_memory);
  out += ",\"hint\":";
  if (instance.hint.empty()) {
    out += "null";
  } else {
    AppendList(out, instance.hint);
  }
  out += ",\"horizon\":" + std::to_string(instance.horizon);
  out += ",\"minimize\":\"" + std::string(instance.minimize_memory ? "memory" : "makespan") + "\"";
  out += ",\"time_limit_s\":" + FormatNumber(instance.time_limit_s);
  out += ",\"workers\":" + std::to_string(instance.workers);
  out += ",\"time_scale\":" + FormatNumber(instance.time_scale);
  out += ",\"memory_scale\":" + FormatNumber(instance.memory_scale);
  out += ",\"exact\":" + std::string(instance.exact ? "true" : "false");
  if (instance.period_microbatches > 0) {
    out += ",\"period_microbatches\":" + std::to_string(instance.period_microbatches);
    out += ",\"hint_period\":" + std::to_string(instance.hint_period);
  }
  out += "}\n";
  return out;
}

StatusOr<SolverOutcome> ParseSolverOutcome(std::string_view text, size_t ops) {
  SolverOutcome outcome;
  std::istringstream lines{std::string(text)};
  std::string line;
  bool has_status = false;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "status") {
      std::string value;
      words >> value;
      has_status = true;
      if (value == "optimal") {
        outcome.result = SolverOutcome::Result::kOptimal;
      } else if (value == "feasible") {
        outcome.result = SolverOutcome::Result::kFeasible;
      } else if (value == "infeasible") {
        outcome.result = SolverOutcome::Result::kInfeasible;
      } else if (value == "unknown") {
        outcome.result = SolverOutcome::Result::kUnknown;
      } else {
        return Internal("the solver's result has an unknown status '" + value + "'");
      }
    } else if (key == "objective") {
      words >> outcome.objective;
    } else if (key == "bound") {
      words >> outcome.bound;
    } else if (key == "wall_s") {
      words >> outcome.wall_s;
    } else if (key == "stopped_by_clock") {
      int flag = 0;
      words >> flag;
      outcome.stopped_by_clock = flag != 0;
    } else if (key == "period") {
      words >> outcome.period;
    } else if (key == "period_proven") {
      int flag = 0;
      words >> flag;
      outcome.period_proven = flag != 0;
    } else if (key == "starts") {
      int64_t start = 0;
      while (words >> start) outcome.starts.push_back(start);
    } else {
      continue;  // a later solver's extra line
    }
    if (words.fail() && !words.eof()) {
      return Internal("the solver's result has a malformed '" + key + "' line");
    }
  }
  if (!has_status) return Internal("the solver's result has no status line");
  const bool solved = outcome.result == SolverOutcome::Result::kOptimal ||
                      outcome.result == SolverOutcome::Result::kFeasible;
  if (solved && outcome.starts.size() != ops) {
    return Internal("the solver's result has " + std::to_string(outcome.starts.size()) +
                    " start times for " + std::to_string(ops) + " ops");
  }
  return outcome;
}

}  // namespace pipeplan
