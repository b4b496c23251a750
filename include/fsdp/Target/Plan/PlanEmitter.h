//===- PlanEmitter.h - the plan file, compiler side ------------*- C++ -*-===//
//
// Writes a module as a plan (docs/plan-format.md): the only contract between
// the compiler and the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TARGET_PLAN_PLANEMITTER_H
#define FSDP_TARGET_PLAN_PLANEMITTER_H

#include "fsdp/runtime/PlanSchema.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace fsdp {

/// The plan format version this compiler writes: the runtime's.
inline constexpr int64_t kPlanFormatVersion = plan::kFormatVersion;

/// Writes the plan of `module`'s function `entry` to `os`. Emits a diagnostic
/// at the first op a plan cannot express and fails.
mlir::LogicalResult emitPlan(mlir::ModuleOp module, llvm::StringRef entry,
                             llvm::raw_ostream &os);

/// The plan's name of an element type (`f32`, `i64`, `i1`, ...), or "".
std::string dtypeName(mlir::Type elementType);

} // namespace fsdp

#endif // FSDP_TARGET_PLAN_PLANEMITTER_H
