//===- fsdp-opt.cpp - the fsdp-opt compiler driver -------------------------===//
//
// Behaves like mlir-opt on `.mlir` input. A TorchScript archive (recognised by
// its content, whatever its name) is imported first; the pass pipeline then
// runs on the imported module. The options and the compilation live in
// lib/Driver.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/Gradients.h"
#include "fsdp/Driver/Compile.h"
#include "fsdp/InitAll.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace mlir;

int main(int argc, char **argv) {
#ifdef __GLIBC__
  // The model's tensors, whose values the import never reads, come from
  // allocations it never touches: fresh pages of their own (mmap). glibc
  // raises its mmap threshold as large blocks are freed (up to 32 MiB), and
  // then serves them from freed heap memory that is resident: the import's
  // peak grew with the archive's size (877 MiB for a 1.4 GB GPT of 48
  // layers, 578 MiB with this; bench/import). A fixed threshold stays put.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  fsdp::registerAllDialects(registry);
  fsdp::registerAllPasses();

  fsdp::driver::CompileOptions options;
  fsdp::driver::bindCommandLine(options);
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "fsdp-opt: compiles TorchScript training into sharded plans",
      registry);
  fsdp::driver::recordGivenFlags(options);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (options.listGradientRules) {
    for (llvm::StringRef name : fsdp::aten::gradientRuleNames())
      llvm::outs() << name << "\n";
    return 0;
  }
  if (options.calibrate)
    return fsdp::driver::calibrate(options, outputFilename, argv[0]);
  if (failed(fsdp::driver::resolveOptions(options)))
    return 1;
  if (options.printConfig) {
    fsdp::driver::printSettings(options, llvm::outs());
    return 0;
  }
  if (failed(fsdp::driver::checkTrainOptions(options)))
    return 1;
  return fsdp::driver::compileFile(options, inputFilename, outputFilename,
                                   registry, config);
}
