#include "pipeplan/torch_ext/step_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace pipeplan::torch_ext {
namespace {

std::string Number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

const char* Bool(bool value) { return value ? "true" : "false"; }

}  // namespace

std::string StepMetricsJsonLines(const std::vector<std::vector<StepRecord>>& by_rank, int warmup) {
  size_t steps = 0;
  for (const std::vector<StepRecord>& records : by_rank) steps = std::max(steps, records.size());
  std::string out;
  for (size_t i = 0; i < steps; ++i) {
    for (size_t rank = 0; rank < by_rank.size(); ++rank) {
      if (i >= by_rank[rank].size()) continue;
      const StepRecord& r = by_rank[rank][i];
      out +=
          "{\"step\": " + std::to_string(r.step + 1) + ", \"warmup\": " + Bool(r.step < warmup) +
          ", \"rank\": " + std::to_string(rank) + ", \"loss\": " + Number(r.loss) +
          ", \"global_grad_norm\": " + (r.global_grad_norm ? Number(*r.global_grad_norm) : "null") +
          ", \"clipped\": " + Bool(r.clipped) + ", \"skipped\": " + Bool(r.skipped) +
          ", \"rolled_back\": " + Bool(r.rolled_back) +
          ", \"replayed_forwards\": " + std::to_string(r.replayed_forwards) + "}\n";
    }
  }
  return out;
}

std::string EncodeStepRecords(const std::vector<StepRecord>& records) {
  std::string out;
  for (const StepRecord& r : records) {
    char line[160];
    std::snprintf(line, sizeof line, "%d %a %d %a %d %d %d %d\n", r.step, r.loss,
                  r.global_grad_norm ? 1 : 0, r.global_grad_norm.value_or(0.0), r.clipped ? 1 : 0,
                  r.skipped ? 1 : 0, r.rolled_back ? 1 : 0, r.replayed_forwards);
    out += line;
  }
  return out;
}

std::optional<std::vector<StepRecord>> DecodeStepRecords(const std::string& text) {
  std::vector<StepRecord> records;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    StepRecord r;
    int has_norm = 0;
    int clipped = 0;
    int skipped = 0;
    int rolled_back = 0;
    double norm = 0;
    if (std::sscanf(line.c_str(), "%d %la %d %la %d %d %d %d", &r.step, &r.loss, &has_norm, &norm,
                    &clipped, &skipped, &rolled_back, &r.replayed_forwards) != 8) {
      return std::nullopt;
    }
    if (has_norm != 0) r.global_grad_norm = norm;
    r.clipped = clipped != 0;
    r.skipped = skipped != 0;
    r.rolled_back = rolled_back != 0;
    records.push_back(r);
  }
  return records;
}

}  // namespace pipeplan::torch_ext
