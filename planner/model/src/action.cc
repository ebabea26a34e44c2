#include "pipeplan/model/action.h"

#include <array>
#include <utility>

namespace pipeplan {
namespace {

struct KindName {
  ActionKind kind;
  std::string_view token;
};

constexpr std::array<KindName, 12> kKindNames = {{
    {ActionKind::kForward, "F"},
    {ActionKind::kBackward, "B"},
    {ActionKind::kBackwardInput, "I"},
    {ActionKind::kBackwardWeight, "W"},
    {ActionKind::kOverlapFB, "OVERLAP_F_B"},
    {ActionKind::kSendForward, "SEND_F"},
    {ActionKind::kRecvForward, "RECV_F"},
    {ActionKind::kSendBackward, "SEND_B"},
    {ActionKind::kRecvBackward, "RECV_B"},
    {ActionKind::kPostValidation, "PV"},
    {ActionKind::kSendPostValidation, "SEND_PV"},
    {ActionKind::kRecvPostValidation, "RECV_PV"},
}};

}  // namespace

SubActions::SubActions(std::initializer_list<Action> actions) {
  if (actions.size() > 0) items_ = std::make_unique<std::vector<Action>>(actions);
}

SubActions::SubActions(const SubActions& other) {
  if (other.items_ != nullptr) items_ = std::make_unique<std::vector<Action>>(*other.items_);
}

SubActions& SubActions::operator=(const SubActions& other) {
  if (this != &other) *this = SubActions(other);
  return *this;
}

void SubActions::push_back(Action action) {
  if (items_ == nullptr) items_ = std::make_unique<std::vector<Action>>();
  items_->push_back(std::move(action));
}

bool SubActions::operator==(const SubActions& other) const {
  if (size() != other.size()) return false;
  for (size_t i = 0; i < size(); ++i) {
    if (!((*this)[i] == other[i])) return false;
  }
  return true;
}

std::string_view KindToken(ActionKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.token;
  }
  return "?";
}

std::optional<ActionKind> KindFromToken(std::string_view token) {
  for (const KindName& entry : kKindNames) {
    if (entry.token == token) return entry.kind;
  }
  return std::nullopt;
}

Action MakeCompute(ActionKind kind, StageId stage, MicrobatchId mb) {
  Action action;
  action.kind = kind;
  action.stage = stage;
  action.microbatch = mb;
  return action;
}

Action MakeOverlap(const Action& forward, const Action& backward) {
  Action action;
  action.kind = ActionKind::kOverlapFB;
  action.stage = forward.stage;
  action.microbatch = forward.microbatch;
  action.sub_actions = {forward, backward};
  return action;
}

std::string ToString(const Action& action) {
  if (action.kind == ActionKind::kOverlapFB) {
    std::string out = "(";
    for (size_t i = 0; i < action.sub_actions.size(); ++i) {
      if (i > 0) out += ';';
      out += ToString(action.sub_actions[i]);
    }
    out += ')';
    out += KindToken(action.kind);
    return out;
  }
  std::string out = std::to_string(action.stage.value);
  out += KindToken(action.kind);
  if (!HasMicrobatch(action.kind)) return out;
  out += std::to_string(action.microbatch.value);
  return out;
}

std::string Where(int rank, size_t index, const Action& action) {
  return "rank " + std::to_string(rank) + ", action " + std::to_string(index) + " (" +
         ToString(action) + ")";
}

}  // namespace pipeplan
