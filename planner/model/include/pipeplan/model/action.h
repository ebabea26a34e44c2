// One entry of a rank's program: a compute op (F, B, I, W, F&B overlap), a point-to-point
// transfer (SEND/RECV of activations or gradients) or a post-validation step.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeplan/model/ids.h"

namespace pipeplan {

// The order of the enumerators is relied on by IsCompute, IsComm and HasMicrobatch.
enum class ActionKind : uint8_t {
  kForward,         // F
  kBackward,        // B: input grad + weight grad
  kBackwardInput,   // I: input grad only
  kBackwardWeight,  // W: weight grad only, after the I of the same (stage, mb)
  kOverlapFB,       // one cell running an F and a B concurrently (sub_actions = {F, B})
  kSendForward,     // SEND_F: activation of `stage` to the rank of stage + 1
  kRecvForward,     // RECV_F: activation for `stage` from the rank of stage - 1
  kSendBackward,    // SEND_B: gradient of `stage` to the rank of stage - 1
  kRecvBackward,    // RECV_B: gradient for `stage` from the rank of stage + 1
  kPostValidation,  // PV: optimizer post-validation
  kSendPostValidation,
  kRecvPostValidation,
};

// Compute: F, B, I, W, OVERLAP_F_B. Comm: SEND/RECV of activations, gradients or the
// post-validation state. PV itself is neither. (Inline: these sit on every hot loop.)
constexpr bool IsCompute(ActionKind kind) { return kind <= ActionKind::kOverlapFB; }
constexpr bool IsComm(ActionKind kind) {
  return (kind >= ActionKind::kSendForward && kind <= ActionKind::kRecvBackward) ||
         kind == ActionKind::kSendPostValidation || kind == ActionKind::kRecvPostValidation;
}
constexpr bool IsSend(ActionKind kind) {
  return kind == ActionKind::kSendForward || kind == ActionKind::kSendBackward ||
         kind == ActionKind::kSendPostValidation;
}
// Whether the kind's actions name a microbatch: PV and its SEND/RECV carry the optimizer's
// state of the whole step, so theirs is unused.
constexpr bool HasMicrobatch(ActionKind kind) { return kind < ActionKind::kPostValidation; }
// Torch-style token for a kind: "F", "B", "I", "W", "OVERLAP_F_B", "SEND_F", ..., "PV".
std::string_view KindToken(ActionKind kind);
std::optional<ActionKind> KindFromToken(std::string_view token);

struct Action;

// The sub-actions of an overlap cell ({forward, backward}); empty for every other action. A
// vector-like value held through one pointer that is null when empty: almost every action of
// a plan has none, and those copy, move and destroy as cheaply as plain data.
class SubActions {
 public:
  SubActions() = default;
  SubActions(std::initializer_list<Action> actions);
  SubActions(const SubActions& other);
  SubActions(SubActions&& other) noexcept = default;
  SubActions& operator=(const SubActions& other);
  SubActions& operator=(SubActions&& other) noexcept = default;
  ~SubActions() = default;

  bool empty() const { return items_ == nullptr; }
  size_t size() const;
  const Action* begin() const;
  const Action* end() const;
  Action* begin();
  Action* end();
  const Action* data() const { return begin(); }
  const Action& operator[](size_t index) const;
  Action& operator[](size_t index);
  void push_back(Action action);
  void clear() { items_.reset(); }

  bool operator==(const SubActions& other) const;

 private:
  std::unique_ptr<std::vector<Action>> items_;  // null when empty, never an empty vector
};

// The members are ordered so that the one-byte fields share a word: 24 bytes, not 32. Every
// pass walks millions of these, so the size is the memory traffic of planning.
struct Action {
  StageId stage;            // the stage on this rank the action belongs to
  MicrobatchId microbatch;  // unused for PV actions
  RankId peer;              // comm only: the other rank
  ActionKind kind = ActionKind::kForward;
  bool rollback = false;   // RECV_F only: must be drained and replayed if validation fails
  SubActions sub_actions;  // kOverlapFB only: {forward, backward}

  bool operator==(const Action&) const = default;
};
static_assert(sizeof(void*) != 8 || sizeof(Action) == 24, "Action grew: mind the field order");

inline size_t SubActions::size() const { return items_ == nullptr ? 0 : items_->size(); }
inline const Action* SubActions::begin() const {
  return items_ == nullptr ? nullptr : items_->data();
}
inline const Action* SubActions::end() const { return begin() + size(); }
inline Action* SubActions::begin() { return items_ == nullptr ? nullptr : items_->data(); }
inline Action* SubActions::end() { return begin() + size(); }
inline const Action& SubActions::operator[](size_t index) const { return begin()[index]; }
inline Action& SubActions::operator[](size_t index) { return begin()[index]; }

Action MakeCompute(ActionKind kind, StageId stage, MicrobatchId mb);
Action MakeOverlap(const Action& forward, const Action& backward);

// "3B5", "2SEND_F1", "(0F1;1B0)OVERLAP_F_B", "1PV": the token torch's CSV grammar uses.
std::string ToString(const Action& action);

// "rank 2, action 17 (3B5)": how every error about one action of a program names it
// (validator, simulator, runtime).
std::string Where(int rank, size_t index, const Action& action);

}  // namespace pipeplan
