// Memory model: activation memory each F adds on its rank, what I and W release, the
// static memory of a rank, and an optional limit on a rank's total.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/ids.h"
#include "pipeplan/model/status.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Units are the user's (bytes, or "microbatch activations"). The default of 1/V per stage
// (1 under dual placement, see ChunksPerShare) measures memory in microbatch activations of
// a rank's whole share of the model, so a limit of P equals the peak of 1F1B on rank 0.
struct StageMemory {
  double activation = 0.0;      // added by F, all released by B; 0 means 1/V
  double freed_by_input = 0.0;  // released by I; W releases the rest (I frees little)
  // What each kind holds for a while inside the action, above the larger of its rank's memory
  // at its start and at its end (workspace, temporaries); freed when it ends.
  double forward_transient = 0.0;
  double backward_transient = 0.0;
  double input_transient = 0.0;
  double weight_transient = 0.0;
  // Of the activation, what a microbatch's backward leaves held: the input gradient it passes
  // back, freed once its send completed (pipeplan-torch frees it at the rank's first op after;
  // torch.distributed.pipelining only at the step's end) or, on the same rank, by the previous
  // stage's backward. At most the activation.
  double retained = 0.0;
  // What the stage itself holds from step to step (its parameters, gradients, optimizer state,
  // its data): static memory that moves with the stage to whichever rank holds it.
  double static_bytes = 0.0;
  // Of the activation, the message its receive of the input allocated: one per stage however
  // deep the stage is, so it does not scale with the stage's depth (SplitShareMemory). At most
  // the activation.
  double received_input = 0.0;
  // Of B's and I's transient, the message the stage's receive of its output gradient
  // allocated. At most the larger of the two.
  double received_gradient = 0.0;
  // The stage's parameter gradients where the runtime allocates them anew each step
  // (zero_grad(set_to_none=True), torch's default): held from the end of the stage's first B
  // or W of a step to the step's end. 0 where they stay allocated (then in static_bytes).
  double gradient = 0.0;
  // Allocated by I and freed by W: what a split backward keeps for its weight half (torch's
  // runtime keeps more than it frees at I). Where set, freed_by_input is 0.
  double allocated_by_input = 0.0;
  // What a split backward (I then W) leaves held beyond `retained`, which is B's: torch's
  // runtime keeps more of a microbatch to the step's end after I and W than after B.
  double split_retained_extra = 0.0;

  bool operator==(const StageMemory&) const = default;
};

// What memory figures count: microbatch activations (the default model's unit: one
// microbatch's activation of a rank's share), or bytes (calibrated from measured memory, an
// allocator's reports). Files spell it "" and "bytes".
enum class MemoryUnit : uint8_t { kModel, kBytes };

struct MemoryModel {
  std::vector<StageMemory> stages = {StageMemory{}};  // size 1 (uniform) or S
  // A rank's static memory besides its stages' static_bytes (all of it where those are 0, as
  // in a model written by hand: parameters, optimizer state, ...).
  double static_per_rank = 0.0;
  // Per rank where ranks differ; empty: every rank has static_per_rank, which is then the
  // largest of these.
  std::vector<double> static_by_rank;
  // Held by the rank of the first / last stage of a chain beyond that stage's static_bytes: a
  // uniform model's first and last stage (an embedding, a loss head).
  double first_stage_static = 0.0;
  double last_stage_static = 0.0;
  // The data a chain's first / last stage holds for the whole step, per microbatch it runs:
  // the model's inputs, the loss's targets (pipeplan-torch makes them all at the step's start).
  // Like the two above they stay with the chain's ends however a plan cuts the model, and they
  // follow the plan's microbatches (a profile at M = 8 predicts a plan at M = 32).
  double first_stage_data_per_microbatch = 0.0;
  double last_stage_data_per_microbatch = 0.0;
  int chains = 0;               // as CostModel::chains, for `stages`
  std::optional<double> limit;  // on static + activations, per rank
  // Bytes where pipeplan calibrate took the figures from measured memory. A limit given with
  // a byte unit needs them.
  MemoryUnit unit = MemoryUnit::kModel;

  // Activation added by one F on `stage`; `chunks_per_share` resolves the default (1/V).
  double Activation(StageId stage, int stages_per_rank) const;
  double FreedByInput(StageId stage, int stages_per_rank) const;
  // What a microbatch's backward on `stage` leaves held (its input gradient), at most the
  // activation: until its send completed where the gradient was sent (the simulator: at the
  // rank's first op once it landed), until the previous stage's
  // backward where that stage is on the same rank (MemoryChangeTable).
  double Retained(StageId stage, int stages_per_rank) const;
  // The message a receive of `stage` allocates (RECV_F: its received input; RECV_B: its
  // received gradient; 0 for other kinds). The consumer counts it from its own start (F's
  // activation, the backward's transient); a receive posted earlier holds it from there on.
  double ReceivedMessage(ActionKind recv, StageId stage, int stages_per_rank) const;
  // What one compute part (F, B, I or W) does to its rank's activation memory: + the
  // activation for F (when it starts), - what B, I or W release (when they end: all but the
  // retained bytes), 0 otherwise.
  double Change(ActionKind kind, StageId stage, int stages_per_rank) const;
  // The transient of F, B, I or W on `stage` (0 for other kinds).
  double Transient(ActionKind kind, StageId stage) const;
  // StageMemory::gradient of `stage`.
  double Gradient(StageId stage) const;
  // The static memory of `rank` where `map` places the stages: its own, its stages'
  // static_bytes and, where it holds a chain's first or last stage, that stage's extra.
  double StaticOf(RankId rank, const StageMap& map) const;
  // The most any rank of `map` holds besides the activations in flight: the largest static
  // memory, the largest transient, and the retained bytes of `microbatch_stages` (V x M: every
  // microbatch of every stage of a rank) at the largest figure. The greedy schedulers keep
  // activations under the limit minus this, so that the plan's true peak fits.
  double LargestFixed(const StageMap& map, int microbatch_stages) const;
  // Whether LargestFixed is what every rank of `map` holds besides its activations: no
  // transients, no retained bytes, the same static memory on every rank (the default model).
  bool LargestFixedIsEveryRanks(const StageMap& map) const;
  // Whether any stage has a transient or retains bytes.
  bool HasTransientOrRetained() const;
  // A figure in this model's unit, for messages: "31.5 MiB (32985136 B)" in bytes (exact, so
  // that a limit quoted back is not rounded below), else the plain number.
  std::string Describe(double value) const;
  // What LargestFixed counts, for messages: "static", or "static + transient + retained".
  const char* FixedName() const;
  // How a greedy's smallest limit by its own count is named: exact where LargestFixed is every
  // rank's ("the smallest limit that works is"); else an upper bound, as a plan's simulated peak
  // can be below the count ("the smallest limit it orders under is").
  const char* SmallestLimitPhrase(const StageMap& map) const;

  bool operator==(const MemoryModel&) const = default;
};

// One rank's share of activation memory split over `chunks` stages: explicit activations
// (but their received input: every stage has one, however deep), what I frees and a stage's
// static bytes divided by `chunks` (the 1/V default already is); a rank's own static memory,
// the first and last stage's extras, the retained and the received gradient, the limit and the
// transients stay (a transient is one layer's workspace at a time, whatever a stage's depth).
MemoryModel SplitShareMemory(MemoryModel share, int chunks);
// The inverse: the figures of one of `chunks` stages per rank as a rank's whole share.
MemoryModel ShareOfStageMemory(MemoryModel stage, int chunks);

// A memory figure in `memory`'s unit, for tables and notes: bytes (FormatBytes) where it counts
// bytes, else the compact number of microbatch activations (FormatCompact).
std::string FormatMemory(double value, const MemoryModel& memory);

Status ValidateMemoryModel(const MemoryModel& memory, int num_stages);
// static_by_rank, when given, has one entry per rank.
Status ValidateStaticByRank(const MemoryModel& memory, int ranks);

}  // namespace pipeplan
