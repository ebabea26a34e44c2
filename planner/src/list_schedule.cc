#include "list_schedule.h"

#include <algorithm>
#include <deque>
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
  const StageMbTable<double>* table = nullptr;
  StageId stage;
  MicrobatchId mb;
};

class ListScheduler {
 public:
  ListScheduler(const ComputeView& compute, const StageMap& stages, int microbatches,
                const CostModel& costs)
      : compute_(compute),
        stages_(stages),
        costs_(costs),
        forward_end_(stages.num_stages(), microbatches, kNotDone),
        input_grad_end_(stages.num_stages(), microbatches, kNotDone),
        forward_depth_(stages.num_stages(), microbatches, 0),
        input_grad_depth_(stages.num_stages(), microbatches, 0),
        head_(compute.size(), 0),
        rank_free_(compute.size(), 0.0),
        rank_depth_(compute.size(), 0),
        queued_(compute.size(), 0) {
    result_.times.resize(compute.size());
    for (size_t r = 0; r < compute.size(); ++r) result_.times[r].resize(compute[r].size());
  }

  StatusOr<ListScheduleResult> Run() {
    for (size_t r = 0; r < compute_.size(); ++r) Wake(static_cast<int>(r));
    size_t done = 0;
    while (!work_.empty()) {
      const int rank = work_.front();
      work_.pop_front();
      queued_[rank] = 0;
      // Run the rank as far as its inputs allow.
      while (head_[rank] < compute_[rank].size()) {
        const auto ready = ReadyTime(rank);
        if (!ready) break;
        Execute(rank, *ready);
        ++done;
      }
    }
    size_t total = 0;
    for (const auto& actions : compute_) total += actions.size();
    if (done != total) return Stuck();
    return std::move(result_);
  }

 private:
  // At most two inputs per part; a fixed array keeps the hot loop free of allocation.
  struct Inputs {
    Input items[2];
    int size = 0;
    void push_back(const Input& input) { items[size++] = input; }
    const Input* begin() const { return items; }
    const Input* end() const { return items + size; }
  };

  // Producers of the inputs of one compute part (not an overlap cell).
  Inputs InputsOf(const Action& part) const {
    Inputs inputs;
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

  struct Ready {
    double start;
    int depth;
  };

  // When all inputs of the rank's next action are available: its start and depth.
  std::optional<Ready> ReadyTime(int rank) const {
    const Action& action = *compute_[rank][head_[rank]];
    double start = rank_free_[rank];
    int depth = rank_depth_[rank];
    for (const Action* part : ComputeParts(action)) {
      for (const Input& input : InputsOf(*part)) {
        if (!InRange(input)) return std::nullopt;
        const double end = input.table->At(input.stage, input.mb);
        if (end == kNotDone) return std::nullopt;
        const bool remote = stages_.RankOf(input.stage) != RankId(rank);
        start = std::max(start, remote ? end + costs_.TransferTime(input.stage, part->stage) : end);
        depth = std::max(depth, DepthOf(input));
      }
    }
    return Ready{start, depth + 1};
  }

  int DepthOf(const Input& input) const {
    return input.table == &forward_end_ ? forward_depth_.At(input.stage, input.mb)
                                        : input_grad_depth_.At(input.stage, input.mb);
  }

  void Wake(int rank) {
    if (queued_[rank]) return;
    queued_[rank] = 1;
    work_.push_back(rank);
  }

  void Execute(int rank, const Ready& ready) {
    const size_t index = head_[rank];
    const Action& action = *compute_[rank][index];
    const double end = ready.start + costs_.ComputeTime(action);
    result_.times[rank][index] = {ready.start, end, ready.depth};
    rank_free_[rank] = end;
    rank_depth_[rank] = ready.depth;
    ++head_[rank];
    for (const Action* part : ComputeParts(action)) MarkDone(*part, end, ready.depth);
    for (const Action* part : ComputeParts(action)) WakeConsumers(*part);
  }

  void MarkDone(const Action& part, double end, int depth) {
    StageMbTable<double>* table = nullptr;
    StageMbTable<int>* depths = nullptr;
    switch (part.kind) {
      case ActionKind::kForward:
        table = &forward_end_;
        depths = &forward_depth_;
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        table = &input_grad_end_;
        depths = &input_grad_depth_;
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
    if (!table->Contains(part.stage, part.microbatch)) return;
    table->At(part.stage, part.microbatch) = end;
    depths->At(part.stage, part.microbatch) = depth;
  }

  void WakeConsumers(const Action& part) {
    const int s = part.stage.value;
    if (part.kind == ActionKind::kForward && !stages_.IsLast(part.stage)) {
      Wake(stages_.RankOf(StageId(s + 1)).value);
    }
    if ((part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput) &&
        !stages_.IsFirst(part.stage)) {
      Wake(stages_.RankOf(StageId(s - 1)).value);
    }
  }

  Status Stuck() const {
    std::string message = "the compute order cannot finish: ";
    bool first = true;
    for (size_t r = 0; r < compute_.size(); ++r) {
      if (head_[r] >= compute_[r].size()) continue;
      if (!first) message += "; ";
      first = false;
      const Action& action = *compute_[r][head_[r]];
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
               std::to_string(owner.value) +
               (owner == RankId(rank) ? ", later on this rank)" : ")");
      }
    }
    return "an input";
  }

  const ComputeView& compute_;
  const StageMap& stages_;
  const CostModel& costs_;
  StageMbTable<double> forward_end_;
  StageMbTable<double> input_grad_end_;
  StageMbTable<int> forward_depth_;
  StageMbTable<int> input_grad_depth_;
  std::vector<size_t> head_;
  std::vector<double> rank_free_;
  std::vector<int> rank_depth_;
  std::vector<uint8_t> queued_;
  std::deque<int> work_;
  ListScheduleResult result_;
};

}  // namespace

std::vector<ComputeRef> CompletionOrder(const ListScheduleResult& schedule) {
  // Each rank completes in program order, so a merge of the ranks suffices.
  struct Head {
    ScheduledCompute time;
    int rank;
    bool operator>(const Head& o) const {
      if (time.end != o.time.end) return time.end > o.time.end;
      if (time.start != o.time.start) return time.start > o.time.start;
      if (time.depth != o.time.depth) return time.depth > o.time.depth;
      return rank > o.rank;
    }
  };
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  std::vector<int> next(schedule.times.size(), 0);
  size_t total = 0;
  for (size_t r = 0; r < schedule.times.size(); ++r) {
    total += schedule.times[r].size();
    if (!schedule.times[r].empty()) heads.push({schedule.times[r][0], static_cast<int>(r)});
  }
  std::vector<ComputeRef> order;
  order.reserve(total);
  while (!heads.empty()) {
    const int rank = heads.top().rank;
    heads.pop();
    order.push_back({rank, next[rank]++});
    if (next[rank] < static_cast<int>(schedule.times[rank].size())) {
      heads.push({schedule.times[rank][next[rank]], rank});
    }
  }
  return order;
}

ComputeView ViewOf(const ComputeOrder& order) {
  ComputeView view(order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    view[r].reserve(order[r].size());
    for (const Action& action : order[r]) view[r].push_back(&action);
  }
  return view;
}

StatusOr<ListScheduleResult> RunListSchedule(const ComputeView& compute, const StageMap& stages,
                                             const CostModel& costs) {
  int microbatches = 0;
  for (int s = 0; s < stages.num_stages(); ++s) {
    microbatches = std::max(microbatches, stages.MicrobatchesOf(StageId(s)));
  }
  return ListScheduler(compute, stages, microbatches, costs).Run();
}

}  // namespace pipeplan
