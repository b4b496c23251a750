//===- InputSpec.h - input specs and file recognition -----------*- C++ -*-===//
//
// What the driver and the passes need to know about inputs without linking
// libtorch: `NAME:DIMSxDTYPE` specs (model inputs, loss targets) and what
// kind of file an input file is.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_INPUTSPEC_H
#define FSDP_IMPORT_INPUTSPEC_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Types.h"
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
  ExportedProgram, // a zip archive with `archive_format` (torch.export.save)
  OtherZip,    // a zip archive without it (torch.save of a state dict, ...)
  CorruptZip,  // starts like a zip archive but has no central directory
  Other,       // anything else: MLIR text or bytecode, or an error later
};
InputFileKind classifyInputFile(llvm::StringRef path);

} // namespace fsdp

#endif // FSDP_IMPORT_INPUTSPEC_H
