//===- CountingAllocator.cpp - what ATen's CPU allocator hands out ---------===//

#include "fsdp/runtime/CountingAllocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace fsdp::runtime;

// torch 2.3 made Allocator::allocate non-const and added copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define FSDP_ALLOCATOR_2_3 1
#define FSDP_ALLOCATE_CONST
#else
#define FSDP_ALLOCATOR_2_3 0
#define FSDP_ALLOCATE_CONST const
#endif

namespace {

std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};

/// Set on a thread whose allocations are not counted (UncountedScope).
thread_local bool uncountedThread = false;

/// One allocation of the wrapped allocator: its memory, its size, and
/// whether it counts.
struct Allocation {
  c10::DataPtr memory;
  int64_t bytes = 0;
  bool counted = true;
};

/// The wrapped allocator's allocations by address: a DataPtr's context must
/// be its address (raw_allocate requires it).
std::mutex allocationsMutex;
std::unordered_map<void *, Allocation> allocations;

void raise(int64_t bytes) {
  int64_t now = liveBytes.fetch_add(bytes) + bytes;
  int64_t seen = peakBytes.load();
  while (now > seen && !peakBytes.compare_exchange_weak(seen, now)) {
  }
}

void release(void *data) {
  Allocation allocation;
  {
    std::lock_guard<std::mutex> lock(allocationsMutex);
    auto it = allocations.find(data);
    if (it == allocations.end())
      return;
    allocation = std::move(it->second);
    allocations.erase(it);
  }
  if (allocation.counted)
    liveBytes.fetch_sub(allocation.bytes);
  // The wrapped allocator frees it as allocation goes out of scope.
}

class Counting final : public c10::Allocator {
public:
  explicit Counting(c10::Allocator *base) : base(base) {}

  c10::DataPtr allocate(size_t n) FSDP_ALLOCATE_CONST override {
    c10::DataPtr inner = base->allocate(n);
    void *data = inner.get();
    c10::Device device = inner.device();
    if (!data)
      return inner; // zero bytes
    int64_t bytes = static_cast<int64_t>(n);
    bool counted = !uncountedThread;
    {
      std::lock_guard<std::mutex> lock(allocationsMutex);
      allocations.emplace(data, Allocation{std::move(inner), bytes, counted});
    }
    if (counted)
      raise(bytes);
    return c10::DataPtr(data, data, &release, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

#if FSDP_ALLOCATOR_2_3
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#endif

private:
  c10::Allocator *base;
};

} // namespace

AllocatorCounter &AllocatorCounter::install() {
  static Counting *counting = [] {
    auto *allocator = new Counting(c10::GetAllocator(c10::DeviceType::CPU));
    c10::SetAllocator(c10::DeviceType::CPU, allocator, /*priority=*/UINT8_MAX);
    return allocator;
  }();
  (void)counting;
  static AllocatorCounter counter;
  return counter;
}

int64_t AllocatorCounter::current() const { return liveBytes.load(); }

int64_t AllocatorCounter::peak() const { return peakBytes.load(); }

void AllocatorCounter::resetPeak() { peakBytes.store(liveBytes.load()); }

AllocatorCounter::UncountedScope::UncountedScope() : was(uncountedThread) {
  uncountedThread = true;
}

AllocatorCounter::UncountedScope::~UncountedScope() { uncountedThread = was; }

void AllocatorCounter::adopt(const at::Tensor &t) {
  if (!t.defined() || !t.has_storage())
    return;
  void *data = t.storage().data_ptr().get();
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(allocationsMutex);
    auto it = allocations.find(data);
    if (it == allocations.end() || it->second.counted)
      return;
    it->second.counted = true;
    bytes = it->second.bytes;
  }
  raise(bytes);
}

bool fsdp::runtime::keepFreedHostMemory() {
#ifdef __GLIBC__
  const char *tunables = std::getenv("GLIBC_TUNABLES");
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      (tunables && std::strstr(tunables, "glibc.malloc.")))
    return false;
  // glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on a
  // 64-bit machine); larger blocks are mapped and unmapped every time.
  bool mmap = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  bool trim = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap && trim;
#else
  return false;
#endif
}
