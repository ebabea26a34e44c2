// A dense table of values per (stage, microbatch): the one place that turns the pair into a
// flat index, so callers never do index arithmetic themselves. (Not for bool: use uint8_t.)
#pragma once

#include <algorithm>
#include <vector>

#include "pipeplan/planner/ids.h"

namespace pipeplan {

template <typename T>
class StageMbTable {
 public:
  StageMbTable(int stages, int microbatches, T initial)
      : microbatches_(microbatches),
        values_(static_cast<size_t>(stages) * static_cast<size_t>(microbatches), initial) {}

  bool Contains(StageId stage, MicrobatchId mb) const {
    return stage.value >= 0 && mb.value >= 0 && mb.value < microbatches_ &&
           Index(stage, mb) < values_.size();
  }
  T& At(StageId stage, MicrobatchId mb) { return values_[Index(stage, mb)]; }
  const T& At(StageId stage, MicrobatchId mb) const { return values_[Index(stage, mb)]; }
  // Every entry back to `value`, keeping the storage.
  void Fill(const T& value) { std::fill(values_.begin(), values_.end(), value); }

 private:
  size_t Index(StageId stage, MicrobatchId mb) const {
    return static_cast<size_t>(stage.value) * static_cast<size_t>(microbatches_) +
           static_cast<size_t>(mb.value);
  }

  int microbatches_;
  std::vector<T> values_;
};

}  // namespace pipeplan
