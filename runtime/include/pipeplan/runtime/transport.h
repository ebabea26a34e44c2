// Transport: how one rank exchanges point-to-point messages with the others. Narrow on purpose
// (c10d style): post a group of sends and receives, wait on each, abort everything. Messages
// between one ordered pair of ranks are matched in the order they were posted, with no tags,
// as NCCL does. Every backend passes tests/runtime/transport_conformance_test.cc.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "pipeplan/model/ids.h"
#include "pipeplan/model/status.h"
#include "pipeplan/runtime/clock.h"

namespace pipeplan::runtime {

enum class P2PKind : uint8_t { kSend, kRecv };

// One transfer. A send reads `buffer`, a receive writes it; the memory must stay valid and
// untouched until the operation completes. A receive must be exactly as large as the message.
struct P2POp {
  P2PKind kind = P2PKind::kSend;
  RankId peer;
  std::span<std::byte> buffer;
};

// A posted transfer. Wait returns Ok once it completed; DeadlineExceeded at `deadline`; the
// transport's abort reason once it was aborted; or the error that made the transfer fail.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual Status Wait(TimePoint deadline) = 0;
  // Whether the transfer has completed (or failed), asked without blocking: once true, Wait
  // returns at once. A backend that cannot tell without blocking answers false (the default);
  // the caller then learns of the end only when it waits.
  virtual bool IsCompleted() { return false; }
  // When the transfer completed (the data landed in the receive buffer, or the send buffer
  // may be reused); the time Wait returned for backends that cannot tell. Only after Wait Ok.
  virtual TimePoint completed_at() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual RankId rank() const = 0;
  virtual int world_size() const = 0;

  // Posts `ops` as one group (one ncclGroupStart/End on NCCL): none of them blocks the others,
  // so a group may both send to and receive from the same peer. Returns one handle per op,
  // in order. Fails with the abort reason once aborted; peers out of range are an error.
  virtual StatusOr<std::vector<std::unique_ptr<PendingOp>>> Post(std::span<const P2POp> ops) = 0;

  // Fails every pending and future operation, on every rank that can be reached, with
  // `reason` (the first reason wins). Safe to call from any thread, more than once.
  virtual void Abort(const Status& reason) = 0;
};

}  // namespace pipeplan::runtime
