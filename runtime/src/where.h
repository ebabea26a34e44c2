// "rank 2, action 17 (3B5)": how runtime errors name one action of one rank, the same way the
// validator does.
#pragma once

#include <cstddef>
#include <string>

#include "pipeplan/planner/action.h"

namespace pipeplan::runtime {

inline std::string Where(RankId rank, size_t index, const Action& action) {
  return "rank " + std::to_string(rank.value) + ", action " + std::to_string(index) + " (" +
         ToString(action) + ")";
}

}  // namespace pipeplan::runtime
