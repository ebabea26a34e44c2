// Memory model: activation memory each F adds on its rank, what I and W release, the
// static memory of a rank, and an optional limit on a rank's total.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/ids.h"
#include "pipeplan/model/status.h"

namespace pipeplan {

// Units are the user's (bytes, or "microbatch activations"). The default of 1/V per stage
// (1 under dual placement, see ChunksPerShare) measures memory in microbatch activations of
// a rank's whole share of the model, so a limit of P equals the peak of 1F1B on rank 0.
struct StageMemory {
  double activation = 0.0;      // added by F, all released by B; 0 means 1/V
  double freed_by_input = 0.0;  // released by I; W releases the rest (I frees little)

  bool operator==(const StageMemory&) const = default;
};

inline constexpr const char* kBytesUnit = "bytes";

struct MemoryModel {
  std::vector<StageMemory> stages = {StageMemory{}};  // size 1 (uniform) or S
  double static_per_rank = 0.0;                       // parameters, optimizer state, ...
  std::optional<double> limit;                        // on static + activations, per rank
  // "bytes" where the figures are bytes (pipeplan calibrate from measured memory); empty: the
  // default unit, microbatch activations. A limit given with a byte unit needs "bytes".
  std::string unit;

  // Activation added by one F on `stage`; `chunks_per_share` resolves the default (1/V).
  double Activation(StageId stage, int stages_per_rank) const;
  double FreedByInput(StageId stage, int stages_per_rank) const;
  // What one compute part (F, B, I or W) does to its rank's activation memory: + the
  // activation for F (when it starts), - what B, I or W release (when they end), 0 otherwise.
  double Change(ActionKind kind, StageId stage, int stages_per_rank) const;

  bool operator==(const MemoryModel&) const = default;
};

// One rank's share of activation memory split over `chunks` stages: explicit activations and
// what I frees divided by `chunks` (the 1/V default already is); static memory and the limit
// are per rank and stay.
MemoryModel SplitShareMemory(MemoryModel share, int chunks);

Status ValidateMemoryModel(const MemoryModel& memory, int num_stages);

}  // namespace pipeplan
