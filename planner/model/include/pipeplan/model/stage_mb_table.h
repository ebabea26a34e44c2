// A dense table of values per (stage, microbatch): the one place that turns the pair into a
// flat index, so callers never do index arithmetic themselves. (Not for bool: use uint8_t.)
#pragma once

#include <algorithm>
#include <vector>

#include "pipeplan/model/ids.h"

namespace pipeplan {

// Which index runs fastest in memory. Stage-major keeps one stage's microbatches together;
// microbatch-major keeps the stages of one microbatch together, for passes that read a stage
// and its neighbour for the same microbatch.
enum class TableOrder { kStageMajor, kMicrobatchMajor };

template <typename T, TableOrder kOrder = TableOrder::kStageMajor>
class StageMbTable {
 public:
  StageMbTable(int stages, int microbatches, T initial)
      : stages_(stages),
        microbatches_(microbatches),
        values_(static_cast<size_t>(stages) * static_cast<size_t>(microbatches), initial) {}

  bool Contains(StageId stage, MicrobatchId mb) const {
    return stage.value >= 0 && stage.value < stages_ && mb.value >= 0 && mb.value < microbatches_;
  }
  T& At(StageId stage, MicrobatchId mb) { return values_[Index(stage, mb)]; }
  const T& At(StageId stage, MicrobatchId mb) const { return values_[Index(stage, mb)]; }
  // Every entry back to `value`, keeping the storage.
  void Fill(const T& value) { std::fill(values_.begin(), values_.end(), value); }

 private:
  size_t Index(StageId stage, MicrobatchId mb) const {
    const auto s = static_cast<size_t>(stage.value);
    const auto m = static_cast<size_t>(mb.value);
    if constexpr (kOrder == TableOrder::kStageMajor) {
      return s * static_cast<size_t>(microbatches_) + m;
    } else {
      return m * static_cast<size_t>(stages_) + s;
    }
  }

  int stages_;
  int microbatches_;
  std::vector<T> values_;
};

}  // namespace pipeplan
