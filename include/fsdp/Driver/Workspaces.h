//===- Workspaces.h - fsdp-opt --measure-workspaces --------------*- C++ -*-===//
//
// The allocator's peak predicted: the memory model's live bytes plus each
// kernel's workspace, measured by running the step's calls once on this
// machine's CPU (Workspaces.cpp says how).
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

/// The threads fsdp-run --nproc gives each of `worldSize` local ranks on
/// this machine by default: its cores divided among them, at least one.
int defaultWorkspaceThreads(int64_t worldSize);

/// Sets `report.allocator`: runs each distinct ATen call of `module`'s step
/// `entry` once (at `threads` intra-op threads, on zero-filled operands laid
/// out as the step has them; a call whose operands hold more than
/// `budgetBytes` is not run, and is listed as not measured, as is one that
/// fails on zeros or that libtorch's autograd differentiates) and adds
/// each instruction's workspace to the live bytes, less the constants
/// fsdp-run keeps for the whole run. Fails with a diagnostic where the
/// step cannot be emitted as a plan.
mlir::LogicalResult measureWorkspaces(mlir::ModuleOp module,
                                      llvm::StringRef entry,
                                      MemoryReport &report, int threads,
                                      int64_t budgetBytes);

} // namespace fsdp::driver

#endif // FSDP_DRIVER_WORKSPACES_H
