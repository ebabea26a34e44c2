#include "list_schedule.h"

#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <utility>

#include "plan_util.h"
#include "stage_mb_table.h"

namespace pipeplan {
namespace {

constexpr double kNotDone = -1.0;

// An input a compute part needs: the end of a producer on some stage (kNotDone until then).
struct Input {
  const StageMbTable<double>* table;
  StageId stage;
  MicrobatchId mb;
};

class ListScheduler {
 public:
  ListScheduler(const ComputeOrder& compute, const StageMap& stages, int microbatches,
                const CostModel& costs)
      : compute_(compute),
        stages_(stages),
        costs_(costs),
        forward_end_(stages.num_stages(), microbatches, kNotDone),
        input_grad_end_(stages.num_stages(), microbatches, kNotDone),
        head_(compute.size(), 0),
        rank_free_(compute.size(), 0.0),
        queued_(compute.size(), false),
        pending_arrival_(compute.size(), 0.0) {
    result_.times.resize(compute.size());
    for (size_t r = 0; r < compute.size(); ++r) result_.times[r].resize(compute[r].size());
  }

  StatusOr<ListScheduleResult> Run() {
    for (size_t r = 0; r < compute_.size(); ++r) TryQueue(static_cast<int>(r));
    size_t done = 0;
    while (!ready_.empty()) {
      const auto [start, rank] = ready_.top();
      ready_.pop();
      queued_[rank] = false;
      Execute(rank, start);
      ++done;
    }
    size_t total = 0;
    for (const auto& actions : compute_) total += actions.size();
    if (done != total) return Stuck();
    return std::move(result_);
  }

 private:
  // Producers of the inputs of one compute part (not an overlap cell).
  std::vector<Input> InputsOf(const Action& part) const {
    std::vector<Input> inputs;
    const StageId s = part.stage;
    const MicrobatchId m = part.microbatch;
    switch (part.kind) {
      case ActionKind::kForward:
        if (!stages_.IsFirst(s)) inputs.push_back({&forward_end_, StageId(s.value - 1), m});
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        inputs.push_back({&forward_end_, s, m});
        if (!stages_.IsLast(s)) inputs.push_back({&input_grad_end_, StageId(s.value + 1), m});
        break;
      case ActionKind::kBackwardWeight:
        inputs.push_back({&input_grad_end_, s, m});
        break;
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        break;
    }
    return inputs;
  }

  bool InRange(const Input& input) const { return input.table->Contains(input.stage, input.mb); }

  // When all inputs of the rank's next action are available: start time, else nullopt.
  std::optional<std::pair<double, double>> ReadyTime(int rank) const {
    const Action& action = compute_[rank][head_[rank]];
    double arrival = 0.0;
    for (const Action* part : ComputeParts(action)) {
      for (const Input& input : InputsOf(*part)) {
        if (!InRange(input)) return std::nullopt;
        const double end = input.table->At(input.stage, input.mb);
        if (end == kNotDone) return std::nullopt;
        const bool remote = stages_.RankOf(input.stage) != RankId(rank);
        const double ready = remote ? end + costs_.TransferTime(input.stage, part->stage) : end;
        arrival = std::max(arrival, ready);
      }
    }
    return std::make_pair(std::max(arrival, rank_free_[rank]), arrival);
  }

  void TryQueue(int rank) {
    if (queued_[rank] || head_[rank] >= compute_[rank].size()) return;
    const auto ready = ReadyTime(rank);
    if (!ready) return;
    queued_[rank] = true;
    pending_arrival_[rank] = ready->second;
    ready_.push({ready->first, rank});
  }

  void Execute(int rank, double start) {
    const size_t index = head_[rank];
    const Action& action = compute_[rank][index];
    const double end = start + costs_.ComputeTime(action);
    result_.times[rank][index] = {start, end, pending_arrival_[rank]};
    result_.start_order.push_back({rank, static_cast<int>(index)});
    rank_free_[rank] = end;
    ++head_[rank];
    for (const Action* part : ComputeParts(action)) MarkDone(*part, end);
    TryQueue(rank);
    for (const Action* part : ComputeParts(action)) WakeConsumers(*part);
  }

  void MarkDone(const Action& part, double end) {
    StageMbTable<double>* table = nullptr;
    switch (part.kind) {
      case ActionKind::kForward:
        table = &forward_end_;
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        table = &input_grad_end_;
        break;
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB:
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return;
    }
    if (table->Contains(part.stage, part.microbatch)) table->At(part.stage, part.microbatch) = end;
  }

  void WakeConsumers(const Action& part) {
    const int s = part.stage.value;
    if (part.kind == ActionKind::kForward && !stages_.IsLast(part.stage)) {
      TryQueue(stages_.RankOf(StageId(s + 1)).value);
    }
    if ((part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput) &&
        !stages_.IsFirst(part.stage)) {
      TryQueue(stages_.RankOf(StageId(s - 1)).value);
    }
  }

  Status Stuck() const {
    std::string message = "the compute order cannot finish: ";
    bool first = true;
    for (size_t r = 0; r < compute_.size(); ++r) {
      if (head_[r] >= compute_[r].size()) continue;
      if (!first) message += "; ";
      first = false;
      const Action& action = compute_[r][head_[r]];
      message += "rank " + std::to_string(r) + " waits at compute action " +
                 std::to_string(head_[r]) + " (" + ToString(action) + ") for " +
                 MissingInput(action, static_cast<int>(r));
    }
    return InvalidArgument(message);
  }

  std::string MissingInput(const Action& action, int rank) const {
    for (const Action* part : ComputeParts(action)) {
      for (const Input& input : InputsOf(*part)) {
        if (!InRange(input)) return "an input outside the topology";
        if (input.table->At(input.stage, input.mb) != kNotDone) continue;
        const char* what = input.table == &forward_end_ ? "F" : "B/I";
        const RankId owner = stages_.RankOf(input.stage);
        return std::string(what) + " of stage " + std::to_string(input.stage.value) +
               " microbatch " + std::to_string(input.mb.value) + " (rank " +
               std::to_string(owner.value) + (owner == RankId(rank) ? ", later on this rank)" : ")");
      }
    }
    return "an input";
  }

  const ComputeOrder& compute_;
  const StageMap& stages_;
  const CostModel& costs_;
  StageMbTable<double> forward_end_;
  StageMbTable<double> input_grad_end_;
  std::vector<size_t> head_;
  std::vector<double> rank_free_;
  std::vector<bool> queued_;
  std::vector<double> pending_arrival_;
  // Min-heap on (start, rank): the earliest action first, lower rank on ties.
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>,
                      std::greater<>>
      ready_;
  ListScheduleResult result_;
};

}  // namespace

StatusOr<ListScheduleResult> RunListSchedule(const ComputeOrder& compute, const StageMap& stages,
                                             int microbatches, const CostModel& costs) {
  return ListScheduler(compute, stages, microbatches, costs).Run();
}

}  // namespace pipeplan
