#include "compute_order_check.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/plan_util.h"
#include "pipeplan/model/stage_mb_table.h"

namespace pipeplan {
namespace {

struct OpState {
  bool forward = false;
  bool backward = false;  // B
  bool input = false;     // I
  bool weight = false;    // W
};

// One program per rank, and at least as many compute operations (F, B, I, W; an overlap cell
// counts two) as the checker's table has cells: every (stage, microbatch) needs two, so a plan
// with fewer cannot be complete, and refusing it here keeps memory in proportion to the plan. A
// few bytes of file may declare billions of pairs (P=4096 V=64 M=65536).
Status CheckSize(const Topology& topology, const ComputeView& order) {
  if (static_cast<int>(order.size()) != topology.ranks) {
    return InvalidArgument("the plan has " + std::to_string(order.size()) +
                           " rank programs but the topology has " + std::to_string(topology.ranks) +
                           " ranks");
  }
  int64_t operations = 0;
  for (const std::vector<const Action*>& program : order) {
    for (const Action* action : program) {
      const ComputePartRange parts = ComputeParts(*action);
      operations += parts.end() - parts.begin();
    }
  }
  const int64_t cells = int64_t{topology.num_stages()} * topology.microbatches;
  if (operations >= cells) return Status::Ok();
  const int64_t pairs =
      int64_t{topology.num_stages()} * StageMap(topology).MicrobatchesOf(StageId(0));
  return InvalidArgument(
      "the plan is incomplete: P=" + std::to_string(topology.ranks) +
      " V=" + std::to_string(topology.stages_per_rank) +
      " M=" + std::to_string(topology.microbatches) + " has " + std::to_string(pairs) +
      " (stage, microbatch) pairs, each needing a forward and a backward, but "
      "the plan has only " +
      std::to_string(operations) + " compute operation" + (operations == 1 ? "" : "s"));
}

class ComputeOrderChecker {
 public:
  // Call CheckSize first: the state table has one entry per (stage, microbatch).
  explicit ComputeOrderChecker(const Topology& topology)
      : topology_(topology),
        stages_(topology),
        state_(topology.num_stages(), topology.microbatches, OpState{}) {}

  Status Check(const ComputeView& order, const std::vector<std::vector<size_t>>* program_index) {
    for (size_t r = 0; r < order.size(); ++r) {
      for (size_t i = 0; i < order[r].size(); ++i) {
        const size_t index = program_index != nullptr ? (*program_index)[r][i] : i;
        PIPEPLAN_RETURN_IF_ERROR(CheckAction(static_cast<int>(r), index, *order[r][i]));
      }
    }
    return CheckComplete();
  }

 private:
  Status CheckAction(int rank, size_t index, const Action& action) {
    if (action.kind == ActionKind::kOverlapFB) {
      PIPEPLAN_RETURN_IF_ERROR(CheckOverlapShape(rank, index, action));
    }
    for (const Action* part : ComputeParts(action)) {
      PIPEPLAN_RETURN_IF_ERROR(CheckPart(rank, index, action, *part));
    }
    return Status::Ok();
  }

  static Status CheckOverlapShape(int rank, size_t index, const Action& action) {
    const auto& subs = action.sub_actions;
    const bool shaped =
        subs.size() == 2 && subs[0].kind == ActionKind::kForward &&
        (subs[1].kind == ActionKind::kBackward || subs[1].kind == ActionKind::kBackwardInput);
    if (!shaped) {
      return InvalidArgument(Where(rank, index, action) +
                             ": an overlap cell must hold one F followed by one B or I");
    }
    return Status::Ok();
  }

  Status CheckPart(int rank, size_t index, const Action& whole, const Action& part) {
    const auto where = [&] { return Where(rank, index, whole); };
    if (part.stage.value < 0 || part.stage.value >= topology_.num_stages()) {
      return InvalidArgument(where() + ": stage " + std::to_string(part.stage.value) +
                             " out of range 0.." + std::to_string(topology_.num_stages() - 1));
    }
    const int microbatches = stages_.MicrobatchesOf(part.stage);
    if (part.microbatch.value < 0 || part.microbatch.value >= microbatches) {
      return InvalidArgument(where() + ": microbatch " + std::to_string(part.microbatch.value) +
                             " out of range 0.." + std::to_string(microbatches - 1));
    }
    const RankId owner = stages_.RankOf(part.stage);
    if (owner != RankId(rank)) {
      return InvalidArgument(where() + ": stage " + std::to_string(part.stage.value) +
                             " belongs to rank " + std::to_string(owner.value));
    }
    OpState& op = state_.At(part.stage, part.microbatch);
    switch (part.kind) {
      case ActionKind::kForward:
        if (op.forward) return InvalidArgument(where() + ": second forward of this microbatch");
        op.forward = true;
        return Status::Ok();
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
        if (!op.forward) return InvalidArgument(where() + ": backward before forward");
        if (op.backward || op.input) {
          return InvalidArgument(where() + ": second backward of this microbatch");
        }
        (part.kind == ActionKind::kBackward ? op.backward : op.input) = true;
        return Status::Ok();
      case ActionKind::kBackwardWeight:
        if (op.backward) {
          return InvalidArgument(where() +
                                 ": weight backward after a full backward (B already "
                                 "computes the weight gradient)");
        }
        if (!op.input) return InvalidArgument(where() + ": weight backward before input backward");
        if (op.weight)
          return InvalidArgument(where() + ": second weight backward of this microbatch");
        op.weight = true;
        return Status::Ok();
      case ActionKind::kOverlapFB:
        return InvalidArgument(where() + ": overlap cells cannot be nested");
      case ActionKind::kSendForward:
      case ActionKind::kRecvForward:
      case ActionKind::kSendBackward:
      case ActionKind::kRecvBackward:
      case ActionKind::kPostValidation:
      case ActionKind::kSendPostValidation:
      case ActionKind::kRecvPostValidation:
        return InvalidArgument(where() + ": not a compute action");
    }
    return Status::Ok();
  }

  Status CheckComplete() const {
    for (int s = 0; s < topology_.num_stages(); ++s) {
      for (int m = 0; m < stages_.MicrobatchesOf(StageId(s)); ++m) {
        const OpState& op = state_.At(StageId(s), MicrobatchId(m));
        const auto what = [&] {
          return std::string("stage " + std::to_string(s) + " microbatch " + std::to_string(m) +
                             " (rank " + std::to_string(stages_.RankOf(StageId(s)).value) + ")");
        };
        if (!op.forward) return InvalidArgument(what() + " has no forward");
        if (!op.backward && !op.input) return InvalidArgument(what() + " has no backward");
        if (op.input && !op.weight) {
          return InvalidArgument(what() + " has an input backward (I) but no weight backward (W)");
        }
      }
    }
    return Status::Ok();
  }

  const Topology& topology_;
  StageMap stages_;
  StageMbTable<OpState> state_;
};
}  // namespace

Status CheckComputeOrder(const Topology& topology, const ComputeView& order,
                         const std::vector<std::vector<size_t>>* program_index) {
  PIPEPLAN_RETURN_IF_ERROR(CheckSize(topology, order));
  return ComputeOrderChecker(topology).Check(order, program_index);
}

}  // namespace pipeplan
