//===- InitAll.cpp - every dialect and pass of fsdp-opt --------------------===//

#include "fsdp/InitAll.h"

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void fsdp::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<fsdp::aten::ATenDialect, fsdp::FSDPDialect,
                  mlir::func::FuncDialect>();
}

void fsdp::registerAllPasses() {
  // The generic clean-ups users expect from an mlir-opt (canonicalize, cse,
  // symbol-dce, ...).
  mlir::registerTransformsPasses();
  fsdp::registerTransformsPassesAndPipelines();
}
