// MemoryMeter: the bytes one rank's tensors hold on its device, as its allocator counts them,
// read around each compute action (OpExecutor::TakeOpMemory).
//
// CPU: a counting allocator wraps c10's CPU allocator (installed once per process, on the
// first CPU meter) and charges every allocation to the meter whose Scope is open on the
// allocating thread; the free goes back to the same meter, on whichever thread it happens.
// So ranks that are threads of one process (--transport inproc) are counted apart. The
// figures are the bytes tensors asked for, exactly; allocations on threads with no open
// scope (intra-op worker threads) are charged to no rank. Each CPU allocation carries a
// 64-byte header (the account and the size), which is not counted.
// CUDA: the caching allocator's statistics for the device (allocated bytes, current and
// peak; not the reserved memory nvidia-smi shows): one figure per device and process, so one
// rank per GPU.
//
// Thread safety: Allocated, Peak and ResetPeak may be called from any thread; the figures
// are exact when the rank's own thread calls them between its ops.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "pipeplan/model/status.h"

namespace pipeplan::torch_ext {

struct CpuAccount;  // memory_meter.cc

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;

  virtual int64_t Allocated() const = 0;  // bytes held now
  virtual int64_t Peak() const = 0;       // the most held since the last ResetPeak
  virtual void ResetPeak() = 0;           // the peak restarts from what is held now

  // While a Scope lives, the CPU allocations of its thread are charged to `meter` (null:
  // nothing changes; CUDA meters need no scope). Scopes nest.
  class Scope {
   public:
    explicit Scope(MemoryMeter* meter);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<CpuAccount> previous_;
  };

 protected:
  // The CPU meter's account, charged inside its scopes; null for a CUDA meter.
  virtual std::shared_ptr<CpuAccount> account() { return nullptr; }
};

// A meter for `device` (cpu, or cuda:N where the build and the machine have CUDA).
StatusOr<std::unique_ptr<MemoryMeter>> MakeMemoryMeter(const at::Device& device);

// Puts the counting CPU allocator in place (on) or the one it wraps back (off), for a
// benchmark that times steps with and without counting in one process. Blocks allocated by
// either stay valid. Call it while no tensor work runs; a CPU meter's figures are meaningless
// while it is off.
Status UseCountingAllocator(bool on);

}  // namespace pipeplan::torch_ext
