// The building block of V-Half and V-Min (controllable_memory.cc, step 1): the F, I and W
// passes of one microbatch on every rank laid out on unit slots, repeated every six slots, and
// a rank's block order for a whole step.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan::strategies {

// Each microbatch brings six passes to every rank (F, I and W on two chunks), so the building
// block repeats every six unit slots.
constexpr int kSlotsPerMicrobatch = 6;

constexpr int kDownChunk = 0;  // chunk 0: data flows from rank 0 to rank P-1
constexpr int kUpChunk = 1;    // chunk 1: data flows back from rank P-1 to rank 0

// The shape of one microbatch's building block, leg by leg in data order: F on chunk 0 down
// the ranks, F on chunk 1 back up, I on chunk 1 down (the loss is on rank 0) and I on chunk 0
// back up. A stride is the number of slots between the passes of neighbouring ranks along a
// leg; a gap is the number of slots between a leg's last pass and the next leg's first (both
// on the same rank). The gap at the loss is solved so that the block repeats without two
// passes of one rank falling on the same slot.
struct BlockShape {
  const char* name = "";
  int forward_down_stride = 1;
  int forward_up_stride = 1;
  int input_down_stride = 1;
  int input_up_stride = 1;
  int forward_turn_gap = 1;  // rank P-1: F on chunk 0 -> F on chunk 1
  int input_turn_gap = 1;    // rank P-1: I on chunk 1 -> I on chunk 0
};

// V-Half: forwards on chunk 0 and input grads on chunk 1 leave one slot between neighbouring
// ranks, which halves the lifespan of 1F1B's block.
constexpr BlockShape kVHalfShape{"v-half", 2, 1, 2, 1, 1, 2};
// V-Min: every leg goes straight through, a third of 1F1B's lifespan.
constexpr BlockShape kVMinShape{"v-min", 1, 1, 1, 1, 1, 1};

// One pass of a rank's block order: what to run and the slot that orders it.
struct PatternEntry {
  int slot = 0;
  ActionKind kind = ActionKind::kForward;
  int chunk = kDownChunk;
  int microbatch = 0;
};

// One leg of the V: a pass kind on one chunk visiting every rank once, in data order.
struct Leg {
  ActionKind kind = ActionKind::kForward;
  int chunk = kDownChunk;
  int stride = 1;
  int gap_before = 0;  // slots from the previous leg's last pass (first leg: none)
};

// The block of one microbatch: the slot of each leg's pass on each rank, repeated every
// kSlotsPerMicrobatch slots for the next microbatch.
class BuildingBlock {
 public:
  static StatusOr<BuildingBlock> Solve(const BlockShape& shape, const StageMap& stages) {
    // Any collision is periodic in the slot, so gaps beyond one period never help.
    for (int loss_gap = 1; loss_gap <= kSlotsPerMicrobatch; ++loss_gap) {
      BuildingBlock block(
          stages,
          {Leg{ActionKind::kForward, kDownChunk, shape.forward_down_stride, 0},
           Leg{ActionKind::kForward, kUpChunk, shape.forward_up_stride, shape.forward_turn_gap},
           Leg{ActionKind::kBackwardInput, kUpChunk, shape.input_down_stride, loss_gap},
           Leg{ActionKind::kBackwardInput, kDownChunk, shape.input_up_stride,
               shape.input_turn_gap}});
      if (block.RepeatsWithoutCollision()) return block;
    }
    return Internal(std::string(shape.name) +
                    ": no gap at the loss lets the building block repeat "
                    "every " +
                    std::to_string(kSlotsPerMicrobatch) + " slots without collision on " +
                    std::to_string(stages.num_ranks()) + " ranks");
  }

  // The block repeated for `microbatches` microbatches on `rank`, then the W's placed on the
  // slots the block leaves free (the W of the oldest I first); in slot order.
  std::vector<PatternEntry> RepeatOn(RankId rank, int microbatches) const {
    std::vector<PatternEntry> passes;
    passes.reserve(legs_.size() * static_cast<size_t>(microbatches));
    for (int mb = 0; mb < microbatches; ++mb) {
      for (const PlacedLeg& placed : legs_) {
        passes.push_back(
            {placed.slot_of_rank[static_cast<size_t>(rank.value)] + mb * kSlotsPerMicrobatch,
             placed.leg.kind, placed.leg.chunk, mb});
      }
    }
    std::sort(passes.begin(), passes.end(),
              [](const PatternEntry& a, const PatternEntry& b) { return a.slot < b.slot; });
    return FillWeights(passes);
  }

 private:
  // A leg with the slot of its pass on each rank, for microbatch 0.
  struct PlacedLeg {
    Leg leg;
    std::vector<int> slot_of_rank;
  };

  BuildingBlock(const StageMap& stages, const std::vector<Leg>& legs) : stages_(stages) {
    int slot = 0;
    for (const Leg& leg : legs) {
      PlacedLeg placed{leg, std::vector<int>(static_cast<size_t>(stages.num_ranks()), 0)};
      const std::vector<RankId> ranks = RanksAlong(leg);
      for (size_t hop = 0; hop < ranks.size(); ++hop) {
        slot += hop == 0 ? leg.gap_before : leg.stride;
        placed.slot_of_rank[static_cast<size_t>(ranks[hop].value)] = slot;
      }
      legs_.push_back(std::move(placed));
    }
  }

  // The ranks a leg visits, in data order: forwards go up the stage numbers, input grads down.
  std::vector<RankId> RanksAlong(const Leg& leg) const {
    std::vector<RankId> ranks;
    const int num_stages = stages_.num_stages();
    for (int i = 0; i < num_stages; ++i) {
      const StageId stage(leg.kind == ActionKind::kForward ? i : num_stages - 1 - i);
      if (stages_.ChunkOf(stage) == leg.chunk) ranks.push_back(stages_.RankOf(stage));
    }
    return ranks;
  }

  bool RepeatsWithoutCollision() const {
    for (int rank = 0; rank < stages_.num_ranks(); ++rank) {
      std::array<bool, kSlotsPerMicrobatch> taken{};
      for (const PlacedLeg& placed : legs_) {
        const int slot = placed.slot_of_rank[static_cast<size_t>(rank)];
        bool& phase = taken[static_cast<size_t>(slot % kSlotsPerMicrobatch)];
        if (phase) return false;
        phase = true;
      }
    }
    return true;
  }

  static std::vector<PatternEntry> FillWeights(const std::vector<PatternEntry>& passes) {
    std::vector<PatternEntry> order;
    order.reserve(passes.size() * 3 / 2);
    std::deque<PatternEntry> waiting;  // I's whose W is not placed yet
    size_t next = 0;
    int slot = 0;
    while (next < passes.size() || !waiting.empty()) {
      if (next < passes.size() && passes[next].slot <= slot) {
        order.push_back(passes[next]);
        if (passes[next].kind == ActionKind::kBackwardInput) waiting.push_back(passes[next]);
        ++next;
      } else if (!waiting.empty()) {
        order.push_back(
            {slot, ActionKind::kBackwardWeight, waiting.front().chunk, waiting.front().microbatch});
        waiting.pop_front();
      } else {
        slot = passes[next].slot;  // nothing to fill: jump to the next pass
        continue;
      }
      ++slot;
    }
    return order;
  }

  const StageMap& stages_;
  std::vector<PlacedLeg> legs_;  // in data order
};

}  // namespace pipeplan::strategies
