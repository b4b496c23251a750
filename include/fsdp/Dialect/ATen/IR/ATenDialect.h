//===- ATenDialect.h - ATen compute ops -------------------------*- C++ -*-===//
#ifndef FSDP_DIALECT_ATEN_IR_ATENDIALECT_H
#define FSDP_DIALECT_ATEN_IR_ATENDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/ATen/IR/ATenOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/ATen/IR/ATenAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/ATen/IR/ATenOps.h.inc"

#include "fsdp/Dialect/ATen/IR/OpTable.h"

namespace fsdp::aten {
/// The size in bytes of the generator state `aten.rng_state` copies (the
/// CPU generator's, what `torch.get_rng_state()` returns).
inline constexpr int64_t kRngStateBytes = 5056;

/// How many operands one schema argument of an `aten.call` takes (its entry
/// in `args`: a tensor, a Tensor[], a Tensor?[] or a non-tensor value).
int64_t numOperandsOf(mlir::Attribute arg);
} // namespace fsdp::aten

#endif // FSDP_DIALECT_ATEN_IR_ATENDIALECT_H
