//===- Import.h - model files to the aten/fsdp dialects ---------*- C++ -*-===//
//
// The only compiler code that links libtorch. Reads a model file and builds
// a module holding one `fsdp.param` / `fsdp.buffer` symbol per parameter
// and buffer and a statically shaped `func.func @forward`. One core
// (lib/Import/Core) builds the calls, types them and declares the state;
// each front end walks its own format's graph into it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_IMPORT_H
#define FSDP_IMPORT_IMPORT_H

#include "fsdp/Import/InputSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace fsdp {

/// Name of the extra file in which python/fsdp_export.py stores input specs.
constexpr const char *kMetadataExtraFile = "fsdp_meta.json";

struct ImportOptions {
  /// Input specs from the command line; they override specs stored in the file.
  std::vector<InputSpec> inputs;
  /// Mixed precision (PyTorch FSDP's MixedPrecision): the element type the
  /// step computes in ("bf16" or "f16"; empty: the model's own). The forward
  /// reads floating-point parameters in `paramDtype` (`fsdp.get` rounds them)
  /// and casts floating-point inputs to it, as FSDP's root casts its forward
  /// inputs; floating-point buffers are read and updated in `bufferDtype`.
  /// Every op is typed by its meta call on the rounded values, so the step
  /// computes in these types exactly as eager PyTorch on such tensors does.
  std::string paramDtype, bufferDtype;
  /// Where the import's phases are timed (`-mlir-timing`); may be null.
  mlir::TimingScope *timing = nullptr;
};

/// Imports `path`, a TorchScript archive (`torch.jit.trace` /
/// `torch.jit.script`, saved with `torch.jit.save`). On failure, diagnostics
/// have been emitted on `context`'s diagnostic engine and null is returned.
mlir::OwningOpRef<mlir::ModuleOp> importTorchScript(llvm::StringRef path,
                                                    const ImportOptions &options,
                                                    mlir::MLIRContext *context);

/// Imports `path`, a torch.export archive (`torch.export.save` of an
/// ExportedProgram, `.pt2`). On failure, diagnostics have been emitted and
/// null is returned.
mlir::OwningOpRef<mlir::ModuleOp>
importExportedProgram(llvm::StringRef path, const ImportOptions &options,
                      mlir::MLIRContext *context);

} // namespace fsdp

#endif // FSDP_IMPORT_IMPORT_H
