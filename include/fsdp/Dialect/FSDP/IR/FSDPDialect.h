//===- FSDPDialect.h - model state and FSDP ops -----------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.h.inc"
#include "fsdp/Dialect/FSDP/IR/FSDPEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

#endif // FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
