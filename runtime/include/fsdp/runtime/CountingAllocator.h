//===- CountingAllocator.h - what ATen's CPU allocator hands out -*- C++ -*-===//
#ifndef FSDP_RUNTIME_COUNTINGALLOCATOR_H
#define FSDP_RUNTIME_COUNTINGALLOCATOR_H

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace fsdp::runtime {

/// Bytes that ATen's CPU allocator has handed out and not yet taken back,
/// counted by a wrapper installed in front of it: every CPU tensor's memory,
/// including what kernels allocate for themselves (workspaces, copies the
/// runtime never sees as a value). On a GPU this is the quantity
/// torch.cuda.max_memory_allocated reports.
class AllocatorCounter {
public:
  /// Installs the counting allocator (once per process) and returns it.
  static AllocatorCounter &install();
  /// Bytes allocated now.
  int64_t current() const;
  /// The most bytes allocated at once since the last resetPeak().
  int64_t peak() const;
  /// Starts a new peak from the current bytes.
  void resetPeak();

  /// While one lives, what its thread allocates is not counted (the next
  /// step's batch, read while a step runs: the step's readings stay its
  /// own) until a tensor holding it is adopted.
  class UncountedScope {
  public:
    UncountedScope();
    ~UncountedScope();
    UncountedScope(const UncountedScope &) = delete;
    UncountedScope &operator=(const UncountedScope &) = delete;

  private:
    bool was;
  };
  /// Counts `t`'s storage from now on, if an uncounted thread allocated it
  /// (a batch the step takes); nothing otherwise, or where the counting
  /// allocator is not installed.
  static void adopt(const at::Tensor &t);
};

/// Has the C library's malloc keep what a step frees for the next step's
/// allocations of the same sizes, instead of giving it back to the kernel
/// and faulting it in again (page by page) when the next step allocates:
/// glibc's threshold for allocating by mmap at its highest (32 MiB), and
/// its trimming of the heap's top only above 2 GiB free. A training
/// process allocates the same sizes every step, so its resident memory
/// stays at its peak either way; the faults are what it saves (a fifth of
/// ResNet-18's step at 2 ranks on a 2-core machine). Nothing where a user
/// set malloc's tunables (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
/// GLIBC_TUNABLES with glibc.malloc.*) or where the C library is not glibc.
/// Returns whether it changed the settings.
bool keepFreedHostMemory();

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_COUNTINGALLOCATOR_H
