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

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_COUNTINGALLOCATOR_H
