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
// peak; not the reserved memory nvidia-smi shows): one figure per device and process. Ranks
// that share a GPU taking turns (threads, one op at a time) each count their own share with a
// turn meter (MakeTurnMeter): what the device's figures do while the rank's scope is open.
//
// Thread safety: Allocated, Peak and ResetPeak may be called from any thread; the figures
// are exact when the rank's own thread calls them between its ops. A turn meter: its rank's
// thread only.
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
  // nothing changes; CUDA meters need no scope), and a turn meter counts what changes as its
  // rank's. Scopes nest.
  class Scope {
   public:
    explicit Scope(MemoryMeter* meter);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<CpuAccount> previous_;
    MemoryMeter* meter_;
  };

 protected:
  // The CPU meter's account, charged inside its scopes; null for a CUDA meter.
  virtual std::shared_ptr<CpuAccount> account() { return nullptr; }
  static std::shared_ptr<CpuAccount> AccountOf(MemoryMeter& meter) { return meter.account(); }
  // A Scope of this meter opens and closes.
  virtual void Enter() {}
  virtual void Leave() {}
};

// A meter for `device` (cpu, or cuda:N where the build and the machine have CUDA).
StatusOr<std::unique_ptr<MemoryMeter>> MakeMemoryMeter(const at::Device& device);

// The whole device's figures: for cuda:N the caching allocator's (as MakeMemoryMeter's); for
// the CPU one account of the process, charged inside a scope of any meter that shares it.
StatusOr<std::shared_ptr<MemoryMeter>> DeviceMeter(const at::Device& device);

// One rank's share of `device` (DeviceMeter) where ranks take turns on it: one at a time, every
// executor call inside a Scope of the rank's meter (the runtime's StepOptions::shared_device).
// What the device's figures do inside the rank's scopes is the rank's. Exact when the rank
// allocates and frees only inside its scopes and no other rank does meanwhile.
std::unique_ptr<MemoryMeter> MakeTurnMeter(std::shared_ptr<MemoryMeter> device);

// Puts the counting CPU allocator in place (on) or the one it wraps back (off), for a
// benchmark that times steps with and without counting in one process. Blocks allocated by
// either stay valid. Call it while no tensor work runs; a CPU meter's figures are meaningless
// while it is off.
Status UseCountingAllocator(bool on);

}  // namespace pipeplan::torch_ext
