//===- Workspaces.h - fsdp-opt --measure-workspaces --------------*- C++ -*-===//
//
// The allocator's peak predicted: the memory model's live bytes plus each
// kernel's workspace, measured by running the step's calls once on this
// machine's CPU; and the step's time with each call's time measured the
// same way (Workspaces.cpp says how).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DRIVER_WORKSPACES_H
#define FSDP_DRIVER_WORKSPACES_H

#include "fsdp/Transforms/Report.h"

#include "mlir/IR/BuiltinOps.h"

namespace fsdp::driver {

/// The most bytes of operands a call may hold for --measure-workspaces to
/// run it (what the compiler's process allocates for one measurement).
constexpr int64_t kWorkspaceBudgetBytes = int64_t(256) << 20;

/// Sets `report.allocator` (`report.prediction` made with its operands'
/// layouts): runs each distinct ATen call (and
/// autograd_backward) of `module`'s step `entry` once, at `threads`
/// intra-op threads, on operands laid out as the step has them (zeros, or
/// floating-point ones where a kernel refuses zeros; a call whose operands
/// hold more than `budgetBytes`, or that fails on both, is listed as not
/// measured), and adds each instruction's workspace, and Gloo's staging of
/// an all-reduce, to the live bytes, less the constants fsdp-run keeps for
/// the whole run. With `kernels`, also times each distinct call (the
/// median of five more runs, on values from [0.5, 1); operands of 1 MiB
/// or more evicted from the caches first) and predicts `report.time`
/// again with the measured times in place of the machine's estimates.
/// Fails with a diagnostic where the step is compiled for a GPU or cannot
/// be emitted as a plan.
mlir::LogicalResult measureWorkspaces(mlir::ModuleOp module,
                                      llvm::StringRef entry,
                                      MemoryReport &report, int threads,
                                      int64_t budgetBytes, bool kernels);

} // namespace fsdp::driver

#endif // FSDP_DRIVER_WORKSPACES_H
