// Coordinator: what the ranks of a multi-process run share besides messages, through a
// rendezvous store (torch_ext's ConnectGloo makes one over c10d's TCPStore; MakeInProcCoordinators
// one in memory for ranks that are threads): barriers, small blobs (each rank's timeline, for
// rank 0 to assemble: timeline_exchange.h; NCCL's unique id) and the run's abort reason, which
// every transport watches so that all ranks stop with the first failing rank's diagnosis.
// Thread-safe; every call may fail once the store is gone (the rank hosting it exited).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeplan/model/status.h"

namespace pipeplan::runtime {

class Coordinator {
 public:
  virtual ~Coordinator() = default;
  // Returns once every rank reached the barrier `name` (each name used once).
  virtual Status Barrier(const std::string& name, std::chrono::milliseconds timeout) = 0;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  // Waits for `key` to be put, up to `timeout`.
  virtual StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Publishes why this rank aborts the run; returns the reason that won: the first any rank
  // published (ours, when the store is gone).
  virtual Status PublishAbort(const Status& reason) = 0;
  // The reason some rank published, if one did; a store that is gone is itself a reason.
  virtual std::optional<Status> PublishedAbort() = 0;
};

// One coordinator per rank over one store in memory: for ranks that are threads of one
// process, and for tests of what ranks exchange. A Get or Barrier past its timeout fails
// naming the key or barrier.
std::vector<std::unique_ptr<Coordinator>> MakeInProcCoordinators(int ranks);

}  // namespace pipeplan::runtime
