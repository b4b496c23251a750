//===- PlanTypes.h - plan dtypes as MLIR element types ----------*- C++ -*-===//
//
// The compiler's side of the plan format's dtype table (PlanSchema.h): the
// MLIR element type of each plan dtype and back, in one place for the
// importer (input specs, mixed precision's compute types), the passes
// (a reduce dtype) and the emitter. Header only: it needs MLIR's builtin
// types and the schema, nothing of a library.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TARGET_PLAN_PLANTYPES_H
#define FSDP_TARGET_PLAN_PLANTYPES_H

#include "fsdp/runtime/PlanSchema.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace fsdp {

/// The MLIR element type of a plan dtype.
inline mlir::Type elementType(plan::DType dtype, mlir::MLIRContext *ctx) {
  using plan::DType;
  switch (dtype) {
  case DType::F32:
    return mlir::Float32Type::get(ctx);
  case DType::F64:
    return mlir::Float64Type::get(ctx);
  case DType::F16:
    return mlir::Float16Type::get(ctx);
  case DType::BF16:
    return mlir::BFloat16Type::get(ctx);
  case DType::I64:
    return mlir::IntegerType::get(ctx, 64);
  case DType::I32:
    return mlir::IntegerType::get(ctx, 32);
  case DType::I16:
    return mlir::IntegerType::get(ctx, 16);
  case DType::I8:
    return mlir::IntegerType::get(ctx, 8);
  case DType::UI8:
    return mlir::IntegerType::get(ctx, 8, mlir::IntegerType::Unsigned);
  case DType::I1:
    return mlir::IntegerType::get(ctx, 1);
  case DType::C64:
    return mlir::ComplexType::get(mlir::Float32Type::get(ctx));
  case DType::C128:
    return mlir::ComplexType::get(mlir::Float64Type::get(ctx));
  }
  return {};
}

/// The MLIR element type a plan dtype name (`f32`, `bf16`, ...) stands for,
/// or null for a name the plan format does not have.
inline mlir::Type elementTypeNamed(llvm::StringRef name,
                                   mlir::MLIRContext *ctx) {
  std::optional<plan::DType> dtype =
      plan::parseDType(std::string_view(name.data(), name.size()));
  return dtype ? elementType(*dtype, ctx) : mlir::Type();
}

/// The plan dtype of an MLIR element type, if the plan format has it.
inline std::optional<plan::DType> planDType(mlir::Type type) {
  using plan::DType;
  for (const plan::DTypeInfo &info : plan::kDTypes)
    if (elementType(info.dtype, type.getContext()) == type)
      return info.dtype;
  return std::nullopt;
}

} // namespace fsdp

#endif // FSDP_TARGET_PLAN_PLANTYPES_H
