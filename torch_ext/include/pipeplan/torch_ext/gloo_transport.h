// The multi-process CPU transport: point-to-point messages over Gloo through LibTorch's c10d
// (ProcessGroupGloo), rendezvous through c10d's TCPStore. Each message travels as a small
// size header then the payload, tagged per peer and direction in posting order, so a size
// mismatch is reported (naming both sizes) instead of tripping Gloo. Abort is published in the
// store and seen by every rank within a poll interval.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "pipeplan/runtime/coordinator.h"
#include "pipeplan/runtime/transport.h"

namespace pipeplan::torch_ext {

struct Rendezvous {
  std::string host = "127.0.0.1";  // where rank 0 serves the TCPStore
  int port = 29500;
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{30000};  // for the rendezvous itself
};

// Reads torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; errors name what is
// missing or malformed.
StatusOr<Rendezvous> RendezvousFromEnvironment();

struct GlooConnection {
  // Declared first, destroyed last: a transport may watch it until it is destroyed.
  std::unique_ptr<runtime::Coordinator> coordinator;
  std::unique_ptr<runtime::Transport> transport;
};

// Connects rank `r.rank` to the others (every rank must call it; it blocks until all have,
// or fails after `r.timeout`).
StatusOr<GlooConnection> ConnectGloo(const Rendezvous& r);

}  // namespace pipeplan::torch_ext
