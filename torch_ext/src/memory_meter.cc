#include "pipeplan/torch_ext/memory_meter.h"

#include <ATen/Context.h>
#include <c10/core/CPUAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <utility>

namespace pipeplan::torch_ext {

struct CpuAccount {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};

  void Add(int64_t bytes) {
    const int64_t now = allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void Remove(int64_t bytes) { allocated.fetch_sub(bytes, std::memory_order_relaxed); }
};

namespace {

thread_local std::shared_ptr<CpuAccount> current_account;

// Every block the counting allocator hands out starts kHeader bytes into the wrapped
// allocator's block, behind a header naming the account it charged: the data pointer is its
// own context, as c10's raw_allocate requires, and the one deleter finds the header from it.
constexpr size_t kHeader = 64;  // keeps c10's 64-byte alignment
struct Header {
  std::shared_ptr<CpuAccount> account;  // null: charged to no rank
  int64_t bytes = 0;
};
static_assert(sizeof(Header) <= kHeader);

c10::DeleterFnPtr inner_deleter = nullptr;  // the wrapped allocator's, set once at install

void FreeCounted(void* data) {
  void* base = static_cast<char*>(data) - kHeader;
  auto* header = static_cast<Header*>(base);
  if (header->account != nullptr) header->account->Remove(header->bytes);
  header->~Header();
  inner_deleter(base);
}

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    void* base = inner_->raw_allocate(n + kHeader);
    auto* header = new (base) Header{current_account, static_cast<int64_t>(n)};
    if (header->account != nullptr) header->account->Add(header->bytes);
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &FreeCounted, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &FreeCounted; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

// The allocator the counting one wraps, and the counting one; made once, live as long as the
// process (blocks of either may be freed at any time).
struct Allocators {
  c10::Allocator* inner = nullptr;
  CountingCpuAllocator* counting = nullptr;
  Status status = Status::Ok();
};

const Allocators& GetAllocators() {
  static const Allocators allocators = [] {
    Allocators out;
    out.inner = c10::GetCPUAllocator();
    inner_deleter = out.inner->raw_deleter();
    if (inner_deleter == nullptr) {
      out.status = FailedPrecondition(
          "the CPU allocator has no raw deleter, so it cannot be wrapped to count memory");
      return out;
    }
    out.counting = new CountingCpuAllocator(out.inner);
    return out;
  }();
  return allocators;
}

// Above the default's priority (0), so that a later default registration does not undo it.
constexpr uint8_t kPriority = 1;

Status InstallCountingAllocator() {
  static std::once_flag once;
  const Allocators& allocators = GetAllocators();
  if (!allocators.status.ok()) return allocators.status;
  std::call_once(once, [&] { c10::SetCPUAllocator(allocators.counting, kPriority); });
  return Status::Ok();
}

class CpuMemoryMeter final : public MemoryMeter {
 public:
  int64_t Allocated() const override { return account_->allocated.load(); }
  int64_t Peak() const override { return account_->peak.load(); }
  void ResetPeak() override { account_->peak.store(account_->allocated.load()); }

 protected:
  std::shared_ptr<CpuAccount> account() override { return account_; }

 private:
  std::shared_ptr<CpuAccount> account_ = std::make_shared<CpuAccount>();
};

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

class CudaMemoryMeter final : public MemoryMeter {
 public:
  explicit CudaMemoryMeter(c10::DeviceIndex device) : device_(device) {}

  int64_t Allocated() const override { return Stats().allocated_bytes[kAll].current; }
  int64_t Peak() const override { return Stats().allocated_bytes[kAll].peak; }
  void ResetPeak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(device_); }

 private:
  static constexpr auto kAll = static_cast<size_t>(StatType::AGGREGATE);
  DeviceStats Stats() const { return c10::cuda::CUDACachingAllocator::getDeviceStats(device_); }

  c10::DeviceIndex device_;
};

// Counts, of a meter of the whole device, what changes while its rank's scope is open: held
// (own_) is the sum of what each closed span left; inside a span the device's change since it
// opened is added. The device's peak restarts with each span, so a span's peak is its own.
class TurnMeter final : public MemoryMeter {
 public:
  explicit TurnMeter(std::shared_ptr<MemoryMeter> device) : device_(std::move(device)) {}

  int64_t Allocated() const override { return own_ + (depth_ > 0 ? Change() : 0); }
  int64_t Peak() const override {
    return depth_ > 0 ? std::max(peak_, own_ + device_->Peak() - entered_) : peak_;
  }
  void ResetPeak() override {
    if (depth_ > 0) device_->ResetPeak();
    peak_ = Allocated();
  }

 protected:
  std::shared_ptr<CpuAccount> account() override { return AccountOf(*device_); }
  void Enter() override {
    if (depth_++ > 0) return;
    device_->ResetPeak();
    entered_ = device_->Allocated();
  }
  void Leave() override {
    if (--depth_ > 0) return;
    peak_ = std::max(peak_, own_ + device_->Peak() - entered_);
    own_ += device_->Allocated() - entered_;
  }

 private:
  int64_t Change() const { return device_->Allocated() - entered_; }

  std::shared_ptr<MemoryMeter> device_;
  int depth_ = 0;
  int64_t entered_ = 0;  // the device's bytes when the span opened
  int64_t own_ = 0;      // the rank's bytes as of the last closed span
  int64_t peak_ = 0;     // the rank's peak since ResetPeak, as of the last closed span
};

}  // namespace

MemoryMeter::Scope::Scope(MemoryMeter* meter) : previous_(current_account), meter_(meter) {
  if (meter == nullptr) return;
  current_account = meter->account();
  meter->Enter();
}

MemoryMeter::Scope::~Scope() {
  if (meter_ != nullptr) meter_->Leave();
  current_account = previous_;
}

Status UseCountingAllocator(bool on) {
  const Allocators& allocators = GetAllocators();
  if (!allocators.status.ok()) return allocators.status;
  c10::SetCPUAllocator(on ? static_cast<c10::Allocator*>(allocators.counting) : allocators.inner,
                       kPriority);
  return Status::Ok();
}

StatusOr<std::shared_ptr<MemoryMeter>> DeviceMeter(const at::Device& device) {
  if (device.is_cpu()) {
    PIPEPLAN_RETURN_IF_ERROR(InstallCountingAllocator());
    static const auto process = std::make_shared<CpuMemoryMeter>();
    return std::shared_ptr<MemoryMeter>(process);
  }
  PIPEPLAN_ASSIGN_OR_RETURN(std::unique_ptr<MemoryMeter> meter, MakeMemoryMeter(device));
  return std::shared_ptr<MemoryMeter>(std::move(meter));
}

std::unique_ptr<MemoryMeter> MakeTurnMeter(std::shared_ptr<MemoryMeter> device) {
  return std::make_unique<TurnMeter>(std::move(device));
}

StatusOr<std::unique_ptr<MemoryMeter>> MakeMemoryMeter(const at::Device& device) {
  if (device.is_cpu()) {
    PIPEPLAN_RETURN_IF_ERROR(InstallCountingAllocator());
    return std::unique_ptr<MemoryMeter>(std::make_unique<CpuMemoryMeter>());
  }
  if (!device.is_cuda()) {
    return InvalidArgument("no memory meter for device '" + device.str() + "' (cpu or cuda:N)");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;  // no driver: no device
  if (!device.has_index() || device.index() >= count) {
    return InvalidArgument("no memory meter for '" + device.str() + "': this machine has " +
                           std::to_string(count) + " CUDA devices");
  }
  // The caching allocator keeps statistics once LibTorch has initialised CUDA, which it does
  // at the first CUDA tensor; ranks taking turns read their meter before that ("did you call
  // init?").
  try {
    at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  } catch (const std::exception& e) {
    return Internal("no memory meter for '" + device.str() +
                    "': CUDA did not initialise: " + e.what());
  }
  return std::unique_ptr<MemoryMeter>(std::make_unique<CudaMemoryMeter>(device.index()));
}

}  // namespace pipeplan::torch_ext
