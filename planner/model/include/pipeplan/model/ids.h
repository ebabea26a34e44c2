// Typed identities for ranks, stages and microbatches, so they cannot be mixed up
// or combined by index arithmetic.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace pipeplan {

template <typename Tag>
struct Id {
  int32_t value = 0;

  constexpr Id() = default;
  constexpr explicit Id(int32_t v) : value(v) {}
  constexpr auto operator<=>(const Id&) const = default;
};

using RankId = Id<struct RankTag>;
using StageId = Id<struct StageTag>;
using MicrobatchId = Id<struct MicrobatchTag>;

}  // namespace pipeplan

template <typename Tag>
struct std::hash<pipeplan::Id<Tag>> {
  size_t operator()(const pipeplan::Id<Tag>& id) const noexcept {
    return std::hash<int32_t>{}(id.value);
  }
};
