#include "rank_exchange.h"

#include <charconv>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace pipeplan::torch_ext {

// Each rank's B alone per stage, to rank 0 through the store (shortest round-trip text).
Status PublishFullBackwards(runtime::Coordinator& coordinator, const FullBackwards& seconds) {
  for (const auto& [stage, value] : seconds) {
    char text[32];
    const auto written = std::to_chars(text, text + sizeof text, value);
    PIPEPLAN_RETURN_IF_ERROR(
        coordinator.Put("backward/" + std::to_string(stage), std::string(text, written.ptr)));
  }
  return Status::Ok();
}

StatusOr<FullBackwards> GatherFullBackwards(runtime::Coordinator& coordinator, int stages,
                                            std::chrono::milliseconds timeout) {
  FullBackwards seconds;
  for (int stage = 0; stage < stages; ++stage) {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string text,
                              coordinator.Get("backward/" + std::to_string(stage), timeout));
    double value = 0;
    const auto read = std::from_chars(text.data(), text.data() + text.size(), value);
    if (read.ec != std::errc() || read.ptr != text.data() + text.size()) {
      return Internal("stage " + std::to_string(stage) + ": B alone came back as '" + text + "'");
    }
    seconds[stage] = value;
  }
  return seconds;
}

Status PublishStepRecords(runtime::Coordinator& coordinator, RankId rank,
                          const std::vector<StepRecord>& records) {
  return coordinator.Put("records/" + std::to_string(rank.value), EncodeStepRecords(records));
}

StatusOr<std::vector<std::vector<StepRecord>>> GatherStepRecords(
    runtime::Coordinator& coordinator, int ranks, std::chrono::milliseconds timeout) {
  std::vector<std::vector<StepRecord>> gathered;
  for (int r = 0; r < ranks; ++r) {
    PIPEPLAN_ASSIGN_OR_RETURN(const std::string text,
                              coordinator.Get("records/" + std::to_string(r), timeout));
    std::optional<std::vector<StepRecord>> records = DecodeStepRecords(text);
    if (!records) return Internal("rank " + std::to_string(r) + " sent malformed step records");
    gathered.push_back(*std::move(records));
  }
  return gathered;
}

}  // namespace pipeplan::torch_ext
