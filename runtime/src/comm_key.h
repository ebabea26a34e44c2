// How the runtime and the synthetic executor find the transfer a compute part consumes: comm
// actions keyed by (kind, stage, microbatch), and the receive each kind of part needs.
#pragma once

#include <cstdint>
#include <optional>

#include "pipeplan/model/action.h"

namespace pipeplan::runtime {

inline uint64_t CommKey(ActionKind kind, StageId stage, MicrobatchId mb) {
  return (static_cast<uint64_t>(kind) << 56) |
         (static_cast<uint64_t>(static_cast<uint32_t>(stage.value) & 0xFFFFFFu) << 32) |
         static_cast<uint32_t>(mb.value);
}

// The receive that brings a part its input from another rank: RECV_F for F, RECV_B for B and
// I, RECV_PV for PV. W, overlap cells (see their parts) and comm need none.
inline std::optional<ActionKind> InputReceiveOf(ActionKind part) {
  switch (part) {
    case ActionKind::kForward:
      return ActionKind::kRecvForward;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      return ActionKind::kRecvBackward;
    case ActionKind::kPostValidation:
      return ActionKind::kRecvPostValidation;
    case ActionKind::kBackwardWeight:
    case ActionKind::kOverlapFB:
    case ActionKind::kSendForward:
    case ActionKind::kRecvForward:
    case ActionKind::kSendBackward:
    case ActionKind::kRecvBackward:
    case ActionKind::kSendPostValidation:
    case ActionKind::kRecvPostValidation:
      break;
  }
  return std::nullopt;
}

}  // namespace pipeplan::runtime
