//===- Report.h - what a sharded step holds per rank ------------*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_REPORT_H
#define FSDP_TRANSFORMS_REPORT_H

#include "fsdp/Analysis/CostModel.h"
#include "fsdp/Analysis/MemoryModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

/// Bytes as a person reads them ("1.50 MiB", "12.00 KiB", "512 B").
std::string formatBytes(int64_t bytes);

/// Prints the FSDP units of a sharded module (module, parameter count,
/// padded size, shard) and the bytes of sharded state a rank holds
/// (parameters, gradients, optimizer state) beside the unsharded model's:
/// `fsdp-opt --fsdp-report`.
void printFSDPReport(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Prints which tensor values the importer read from the archive (module
/// tensors used as constants; never parameters or buffers), part of
/// printFSDPReport.
void printValuesRead(mlir::ModuleOp module, llvm::raw_ostream &os);

/// Prints the schedule of `module`'s sharded step as the plan has it: how
/// many all-gathers start ahead of their wait (prefetched), per phase, and
/// the most gathered buffers and reductions in flight at once.
void printScheduleReport(mlir::ModuleOp module, llvm::raw_ostream &os);

/// The predicted memory of one rank during the step `entry` (the memory
/// model of fsdp/Analysis/MemoryModel.h), with the names of its places.
struct MemoryReport {
  MemoryPrediction prediction;
  int64_t worldSize = 1;
  std::string peakOp, peakModule, peakPhase;
  /// The module path of each unit's flat parameter ("" for the root).
  llvm::StringMap<std::string> unitModules;
  /// The step's predicted time (the cost model) on `machine`.
  MachineRates machine;
  TimePrediction time;
  /// The evaluation step's peak and where (beside a training step that
  /// has one).
  std::optional<int64_t> evalPeakBytes;
  int64_t evalPeakInstruction = 0;

  /// What ATen's CPU allocator holds during the step (fsdp-opt
  /// --measure-workspaces; fsdp-run's allocator_peak_bytes on CPU ranks):
  /// per instruction, the live bytes less the constants fsdp-run keeps for
  /// the whole run, plus what its kernel allocates for itself.
  struct Allocator {
    int64_t peakBytes = 0;
    int64_t peakInstruction = -1; // -1: before the first
    std::string peakOp;
    llvm::SmallVector<int64_t> instructionPeak;
    /// Each instruction's workspace (0 where none or not measured).
    llvm::SmallVector<int64_t> workspace;
    /// Calls measured, and the distinct ones among them that ran.
    int64_t measured = 0, classes = 0;
    int threads = 1;
    /// Instructions whose workspace was not measured: index, operator and
    /// why.
    struct Unmeasured {
      int64_t instruction;
      std::string op, why;
    };
    std::vector<Unmeasured> unmeasured;
  };
  std::optional<Allocator> allocator;
};

/// Predicts `module`'s step `entry`, its memory and its time on `machine`;
/// fails at an op the model cannot simulate (the diagnostic says which).
/// With `operandLayouts` the prediction also has each call's operands'
/// layouts (MemoryPrediction::callOperands).
mlir::FailureOr<MemoryReport>
predictMemoryReport(mlir::ModuleOp module, llvm::StringRef entry,
                    const MachineRates &machine, bool operandLayouts = false);

/// "12.34 ms", "850 us", "1.20 s".
std::string formatSeconds(double seconds);

/// Prints the report: the peak, where it occurs and what it holds, and the
/// peak while each unit is gathered (`fsdp-opt --memory-report`).
void printMemoryReport(const MemoryReport &report, llvm::raw_ostream &os);

/// The same as JSON (`--memory-report-json`): peak_bytes, the peak's place,
/// breakdown, units, the live bytes after each instruction (timeline), and
/// the predicted time (step_seconds, and per instruction).
void writeMemoryReportJSON(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace fsdp

#endif // FSDP_TRANSFORMS_REPORT_H
