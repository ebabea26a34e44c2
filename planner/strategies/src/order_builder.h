// Appends compute actions to one rank's order by local chunk and microbatch, so generators
// read like the rules in docs/strategies.md.
#pragma once

#include <utility>
#include <vector>

#include "pipeplan/model/action.h"
#include "pipeplan/model/topology.h"

namespace pipeplan::strategies {

class RankOrderBuilder {
 public:
  RankOrderBuilder(const StageMap& stages, RankId rank) : stages_(stages), rank_(rank) {
    // At most F, I and W per (chunk, microbatch); reserving untouched memory costs nothing.
    const std::vector<StageId>& chunks = stages.StagesOf(rank);
    if (!chunks.empty()) {
      actions_.reserve(3 * chunks.size() * static_cast<size_t>(stages.MicrobatchesOf(chunks[0])));
    }
  }

  void Add(ActionKind kind, int chunk, int microbatch) {
    actions_.push_back(MakeCompute(kind, stages_.StagesOf(rank_)[chunk], MicrobatchId(microbatch)));
  }
  void Forward(int chunk, int microbatch) { Add(ActionKind::kForward, chunk, microbatch); }
  void Backward(int chunk, int microbatch) { Add(ActionKind::kBackward, chunk, microbatch); }
  void Input(int chunk, int microbatch) { Add(ActionKind::kBackwardInput, chunk, microbatch); }
  void Weight(int chunk, int microbatch) { Add(ActionKind::kBackwardWeight, chunk, microbatch); }
  void Append(Action action) { actions_.push_back(std::move(action)); }

  std::vector<Action> Take() { return std::move(actions_); }

 private:
  const StageMap& stages_;
  RankId rank_;
  std::vector<Action> actions_;
};

}  // namespace pipeplan::strategies
