//===- MemoryReport.cpp - fsdp-memory-report -------------------------------===//
//
// fsdp-memory-report: prints the memory model's prediction for the step
// (text or JSON); the prediction and its printers are in Report.cpp.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Transforms/Passes.h"
#include "fsdp/Transforms/Report.h"
#include "fsdp/Analysis/CostModel.h"

namespace fsdp {
#define GEN_PASS_DEF_MEMORYREPORT
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct MemoryReportPass : public fsdp::impl::MemoryReportBase<MemoryReportPass> {
  using MemoryReportBase::MemoryReportBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef entry = module.lookupSymbol("train_step") ? "train_step" : "forward";
    std::string error;
    FailureOr<MachineRates> rates = loadMachine(machine, error);
    if (failed(rates)) {
      module.emitError(error);
      return signalPassFailure();
    }
    FailureOr<MemoryReport> report = predictMemoryReport(module, entry, *rates);
    if (failed(report))
      return signalPassFailure();
    if (!coldKernelSeconds.empty() &&
        coldKernelSeconds.size() != kernelSeconds.size()) {
      module.emitError("cold-kernel-seconds gives ")
          << coldKernelSeconds.size() << " times, kernel-seconds "
          << kernelSeconds.size() << ": one of each per instruction";
      return signalPassFailure();
    }
    if (!kernelSeconds.empty()) {
      FailureOr<TimePrediction> time =
          predictTime(module, module.lookupSymbol<func::FuncOp>(entry), *rates,
                      kernelSeconds, coldKernelSeconds);
      if (failed(time))
        return signalPassFailure();
      report->time = std::move(*time);
    }
    if (json)
      writeMemoryReportJSON(*report, llvm::outs());
    else
      printMemoryReport(*report, llvm::outs());
    markAllAnalysesPreserved();
  }
};

} // namespace
