// Cost model: how long each compute op takes per stage, and what a transfer across a
// stage boundary costs. Uniform (one entry) or per stage / per boundary.
#pragma once

#include <cstdint>
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

// Where a figure came from: given (a flag or a hand-written file, taken as stated), measured
// in a profiled run, or assumed (calibrate derived it from other figures, e.g. I = W = B / 2
// where no run split the backward, or B = I + W where no run ran a full backward).
enum class FigureOrigin : uint8_t { kGiven, kMeasured, kAssumed };

struct FigureSource {
  FigureOrigin origin = FigureOrigin::kGiven;
  int run = 0;  // measured: the index into CostModel::runs of the run that measured it

  bool operator==(const FigureSource&) const = default;
};

// One stage's StageCosts, figure by figure.
struct StageSources {
  FigureSource forward;
  FigureSource backward;
  FigureSource backward_input;
  FigureSource backward_weight;
  FigureSource overlap;

  // I and W taken as B / 2 each, where nothing split the backward (B alone given).
  void AssumeSplit() {
    backward_input = backward_weight = FigureSource{.origin = FigureOrigin::kAssumed, .run = 0};
  }

  bool operator==(const StageSources&) const = default;
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
  // Per stage (as `stages`) where each figure came from; empty: every figure given. `runs`
  // names the profiled runs a measured figure points to ("1f1b P=2 V=1 M=8, torch cpu").
  std::vector<StageSources> sources = {};
  std::vector<std::string> runs = {};

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
// The part of it that checks `sources`: one entry per stage entry or none, and every measured
// figure's run among `runs` (errors name "costs.sources[2].backward.run").
Status ValidateSources(const CostModel& costs);

}  // namespace pipeplan
