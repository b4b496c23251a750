//===- InitAll.h - every dialect and pass of fsdp-opt -----------*- C++ -*-===//
//
// One place registers what the tools see, so every tool sees the same set.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITALL_H
#define FSDP_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace fsdp {
/// The dialects fsdp-opt reads and writes.
void registerAllDialects(mlir::DialectRegistry &registry);
/// The passes and named pipelines of fsdp-opt.
void registerAllPasses();
} // namespace fsdp

#endif // FSDP_INITALL_H
