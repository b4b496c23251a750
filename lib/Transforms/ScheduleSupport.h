//===- ScheduleSupport.h - what the scheduling passes share ----*- C++ -*-===//
//
// fsdp-shard places every all-gather right before its wait and every
// reduction's wait at the end of the step. The scheduling passes decide which
// gathers start earlier (fsdp-prefetch, Prefetch.cpp), take back what a
// memory limit forbids (fsdp-limit-all-gathers, LimitAllGathers.cpp), bound
// the reductions in flight (fsdp-limit-reductions, LimitReductions.cpp), and
// move the ops (fsdp-apply-schedule, ApplySchedule.cpp): decide, record the
// decision on the op, apply, each step on its own. This header holds the
// helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_TRANSFORMS_SCHEDULESUPPORT_H
#define FSDP_LIB_TRANSFORMS_SCHEDULESUPPORT_H

#include "fsdp/Analysis/StepAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace fsdp::schedule {

/// The op a prefetched gather starts after: the wait ("wait") or the free
/// ("free") of the previous gather of its phase; null if there is none or
/// the mark is neither.
mlir::Operation *anchorOf(llvm::ArrayRef<Gather> gathers, size_t k,
                          llvm::StringRef mark);

/// The gather's prefetch mark (fsdp.prefetch), empty if unmarked.
llvm::StringRef markOf(const Gather &g);

/// Calls `f` on the body of every function that has one.
template <typename F> void forEachStep(mlir::ModuleOp module, F f) {
  module.walk([&](mlir::func::FuncOp func) {
    if (!func.getBody().empty())
      f(func.getBody().front());
  });
}

/// Whether an op after `from` and before `read` writes the state `read`
/// reads.
bool updatedBetween(mlir::Operation *from, GetOp read);

/// A limit option: negative is an error; 0 means no limit.
mlir::LogicalResult checkLimit(mlir::ModuleOp module, int64_t limit,
                               llvm::StringRef what);

/// The step's reduction starts (reduce-scatter, all-reduce), in order.
llvm::SmallVector<mlir::Operation *> reductionStarts(mlir::Block &body);

} // namespace fsdp::schedule

#endif // FSDP_LIB_TRANSFORMS_SCHEDULESUPPORT_H
