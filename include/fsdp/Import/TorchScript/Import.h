//===- Import.h - TorchScript to the aten/fsdp dialects ---------*- C++ -*-===//
//
// The only compiler code that links libtorch. Reads a TorchScript archive
// (`torch.jit.trace` / `torch.jit.script`, saved with `torch.jit.save`) and
// builds a module holding one `fsdp.param` / `fsdp.buffer` symbol per
// parameter and buffer and a statically shaped `func.func @forward`.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_TORCHSCRIPT_IMPORT_H
#define FSDP_IMPORT_TORCHSCRIPT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace fsdp {

/// The static type of one model input, `NAME:DIMSxDTYPE` on the command line
/// (`x:8x3x32x32xf32`, `ids:4x128xi64`, a scalar `t:f32`).
struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype; // f32 f16 bf16 f64 i64 i32 i1

  std::string str() const;
  /// The MLIR element type of `dtype`.
  mlir::Type elementType(mlir::MLIRContext *context) const;
};

/// Parses `NAME:DIMSxDTYPE`; on failure returns false and says why in `error`.
bool parseInputSpec(llvm::StringRef text, InputSpec &spec, std::string &error);

/// What a file is, by its content rather than its name.
enum class InputFileKind {
  TorchScript, // a zip archive with `constants.pkl` (torch.jit.save)
  OtherZip,    // a zip archive without it (torch.save of a state dict, ...)
  CorruptZip,  // starts like a zip archive but has no central directory
  Other,       // anything else: MLIR text or bytecode, or an error later
};
InputFileKind classifyInputFile(llvm::StringRef path);

/// Name of the extra file in which python/fsdp_export.py stores input specs.
constexpr const char *kMetadataExtraFile = "fsdp_meta.json";

struct ImportOptions {
  /// Input specs from the command line; they override specs stored in the file.
  std::vector<InputSpec> inputs;
  /// Where the import's phases are timed (`-mlir-timing`); may be null.
  mlir::TimingScope *timing = nullptr;
};

/// Imports `path`. On failure, diagnostics have been emitted on `context`'s
/// diagnostic engine and null is returned.
mlir::OwningOpRef<mlir::ModuleOp> importTorchScript(llvm::StringRef path,
                                                    const ImportOptions &options,
                                                    mlir::MLIRContext *context);

} // namespace fsdp

#endif // FSDP_IMPORT_TORCHSCRIPT_IMPORT_H
