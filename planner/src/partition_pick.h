// Which of partition's candidates is picked, what is said of the pick, and the error where
// nothing fits. Internal to the planner library (partition.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pipeplan/model/memory_model.h"
#include "pipeplan/model/status.h"
#include "pipeplan/planner/partition.h"

namespace pipeplan::partition_pick {

struct PickOfCandidates {
  size_t index = 0;                // into the candidates
  std::vector<std::string> notes;  // why not the fastest, where it is not
};

// Of `sorted` (fastest first, those that fit ahead, the first fitting): the fastest whose step
// rests on given figures alone (the fastest where every one rests on an assumption); then,
// where a candidate with fewer stages per rank simulates within 0.1% of it, that one, as the
// simulation leaves out the runtime's own time per action, which more stages per rank
// multiply.
PickOfCandidates Pick(const std::vector<PartitionCandidate>& sorted);

// Nothing in `sorted` fits: the smallest peak a split reached, and whose; with a limit per rank,
// the nearest candidate (sorted ahead of the others) and the rank it is over on.
Status NothingFits(const PartitionRequest& request, const std::vector<PartitionCandidate>& sorted);

// A memory model in bytes, to describe byte figures in messages.
MemoryModel InBytes();

}  // namespace pipeplan::partition_pick
