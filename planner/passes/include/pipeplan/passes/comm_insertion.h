// Comm insertion pass: adds SEND/RECV pairs for every cross-rank dependency of a compute
// order. Every rank's comm sequence is a projection of one global message order (by the
// time each message's data is ready), so the plan cannot deadlock even if every transfer
// were a rendezvous; each RECV sits as late as that order allows, normally right before
// its consumer.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeplan/model/cost_model.h"
#include "pipeplan/model/plan.h"
#include "pipeplan/model/topology.h"

namespace pipeplan {

// Where a RECV goes, within what the global message order allows. kBeforeConsumer: as late as
// it allows, right before the compute that needs it (a runtime that moves transfers in the
// background, as pipeplan's, holds the message for the least time). kWhenSent: where the data
// is sent by the list schedule's clock, after the receiver's last compute that ends by then (a
// runtime whose receive cannot start before the compute enqueued ahead of it ends, as torch's
// on NCCL, then does not pay the transfer on the consumer's path).
enum class ReceivePlacement : uint8_t { kBeforeConsumer, kWhenSent };

// Fails (naming the rank and action) if the compute order cannot make progress. Takes the
// order by value: its actions move into the programs.
StatusOr<std::vector<RankProgram>> InsertComm(ComputeOrder order, const StageMap& stages,
                                              const CostModel& costs);

// The global linear order of compute actions that InsertComm numbers messages by: completion
// order in a deterministic list schedule of `order` under `costs` (ties: earlier start
// first). It respects every rank's order and every dependency. Entries are (rank, index).
struct ComputeRef {
  int rank = 0;
  int index = 0;
  bool operator==(const ComputeRef&) const = default;
};
StatusOr<std::vector<ComputeRef>> GlobalComputeOrder(const ComputeOrder& order,
                                                     const StageMap& stages,
                                                     const CostModel& costs);

}  // namespace pipeplan
