//===- Compile.h - fsdp-opt's compilation ------------------------*- C++ -*-===//
//
// What fsdp-opt does with its input once its options are resolved: import
// (or parse), the budget searches, the pipeline, the reports and the output.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DRIVER_COMPILE_H
#define FSDP_DRIVER_COMPILE_H

#include "fsdp/Driver/Options.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace fsdp::driver {

/// Compiles `inputFilename` (a TorchScript archive, recognised by its
/// content, or MLIR) as `options` say and writes `outputFilename`; behaves
/// as mlir-opt on MLIR when nothing of fsdp-opt's own is asked. Any error
/// leaves no output file behind. Returns the exit code.
int compileFile(CompileOptions &options, const std::string &inputFilename,
                const std::string &outputFilename,
                mlir::DialectRegistry &registry,
                const mlir::MlirOptMainConfig &config);

/// `--calibrate`: runs `fsdp-run --calibrate OUTPUT --nproc N` (the
/// fsdp-run beside this executable, `argv0`; N is --world-size, 2 when not
/// given) and returns its exit code.
int calibrate(const CompileOptions &options, const std::string &outputFilename,
              const char *argv0);

} // namespace fsdp::driver

#endif // FSDP_DRIVER_COMPILE_H
