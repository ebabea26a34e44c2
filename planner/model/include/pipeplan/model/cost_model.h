// Cost model: how long each compute op takes per stage, and what a transfer across a
// stage boundary costs. Uniform (one entry) or per stage / per boundary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/ids.h"
#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// Durations in the user's time unit (the demo uses microseconds).
struct StageCosts {
  double forward = 1.0;
  double backward = 2.0;         // full backward; defaults to I + W when built from flags
  double backward_input = 1.0;   // I
  double backward_weight = 1.0;  // W
  double overlap = 0.0;          // one F&B cell; 0 means forward + backward

  bool operator==(const StageCosts&) const = default;
};

// The boundary between stage s and s + 1 (index s). Gradients are as large as activations.
struct BoundaryCosts {
  double latency = 0.0;           // fixed cost of one transfer
  double bandwidth = 0.0;         // bytes per time unit; 0 means infinite
  double activation_bytes = 0.0;  // bytes of one microbatch's activation
  // What a receive takes once posted even when its data is already there (LogP's overhead):
  // it completes at max(post + receive_overhead, producer end + TransferTime).
  double receive_overhead = 0.0;

  bool operator==(const BoundaryCosts&) const = default;
};

struct CostModel {
  std::vector<StageCosts> stages = {StageCosts{}};            // size 1 (uniform) or S
  std::vector<BoundaryCosts> boundaries = {BoundaryCosts{}};  // size 1 (uniform) or S - 1
  std::string time_unit;  // informational ("us" from calibrate); empty when not stated
  // The copies of the model the per-stage entries describe, one after another: 2 where they
  // are a dual placement's stages (dualpipe: entries P..2P-1 the second copy); 0 or 1: one.
  // FitStageFigures reads a file of one placement for a plan of another (stage_recut.h).
  int chains = 0;
  // A cost file's memory model (calibrate writes one, in bytes, from measured memory): a
  // request built with the file takes it as its memory model.
  std::optional<MemoryModel> memory;

  const StageCosts& Stage(StageId stage) const;
  // The boundary between two neighbouring stages (the lower one's index).
  const BoundaryCosts& Boundary(StageId from, StageId to) const;
  // Duration of one compute action (F, B, I, W or an overlap cell) on its stage.
  double ComputeTime(const Action& action) const;
  // Time from the producer's end until the consumer on the other rank may start.
  double TransferTime(StageId from, StageId to) const;
  // The receive overhead of the boundary between the two stages.
  double ReceiveOverhead(StageId from, StageId to) const;

  bool operator==(const CostModel&) const = default;
};

// One rank's share of compute split over `chunks` stages (see ChunksPerShare): every compute
// duration divided by `chunks`; comm is unchanged. Compare and auto use it so every strategy
// models the same work per rank.
CostModel SplitShareCosts(CostModel share, int chunks);
// The inverse: the costs of one of `chunks` stages per rank as a rank's whole share.
CostModel ShareOfStageCosts(CostModel stage, int chunks);

// Checks sizes against the number of stages and that every figure is finite and >= 0, the
// memory model's too.
Status ValidateCostModel(const CostModel& costs, int num_stages);

}  // namespace pipeplan
