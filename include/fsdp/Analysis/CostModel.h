//===- CostModel.h - the time a rank spends on a step -----------*- C++ -*-===//
//
// The cost model of a plan, beside its memory model: a predicted time for
// every instruction of the step on one rank, from what it computes and moves
// and the rates of a machine, and the step's time from them.
//
// An ATen call costs the machine's fixed overhead of a kernel call plus the
// larger of its arithmetic (matrix products, convolutions and attention,
// counted in floating-point operations at the machine's matrix rate for
// their dtype) and the bytes it reads and writes (every tensor operand and
// result, at the machine's memory rate; a call on host memory, CPU offload's
// optimizer step, at the host's). A view costs the overhead alone. A
// collective moves (n-1)/n of its buffer in a group of n (twice for an
// all-reduce; in a group of one it copies its input, as a kernel of the
// computation) at the machine's collective rate, after a fixed latency; it
// runs on a timeline of its own, overlapping the computation by the
// machine's `collective_overlap`, and a wait blocks the computation until
// its collective is done. A collective starts only when the slowest rank
// joins it: later, by the machine's `collective_skew`, the longer the
// ranks computed since a wait (or a collective the computation was held
// for to its end) last held them together. CPU offload's copies move
// their bytes at the copy rate.
//
// Where the step returns a loss (a 0-d floating-point first result), the
// step as fsdp-run times it ends with the ranks' losses all-reduced: one
// more collective, which the computation waits for. Where a call's time
// was measured on this machine (fsdp-opt --measure-kernels), the measured
// time replaces the rates' estimate: its time with its operands in the
// caches, or evicted from them for the share of its operands' bytes that
// the computation last touched more than the machine's `cache_bytes` ago
// (counting the bytes every call and collective result touches since).
//
// The rates come from a machine file (`fsdp-run --calibrate`, keys in
// fsdp/runtime/MachineSchema.h) or a built-in machine (`cpu`, `h100`).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_COSTMODEL_H
#define FSDP_ANALYSIS_COSTMODEL_H

#include "fsdp/runtime/MachineSchema.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace fsdp {

/// The rates of a machine (MachineSchema.h's keys), per rank while `ranks`
/// ranks share it.
struct MachineRates {
  std::string name;
  /// Where the rates come from: "built-in" or the file's path.
  std::string source;
  int64_t ranks = 1;
  double matmulFlopsPerSec = 0, matmulHalfFlopsPerSec = 0;
  double convFlopsPerSec = 0;
  double memoryBytesPerSec = 0, hostMemoryBytesPerSec = 0;
  double opOverheadSec = 0;
  double collectiveBytesPerSec = 0, collectiveLatencySec = 0;
  double copyBytesPerSec = 0;
  double collectiveOverlap = 0;
  /// A collective's wait for the slowest rank per second computed since
  /// the ranks last waited together (MachineSchema.h's kSkewKey).
  double collectiveSkew = 0;
  /// The bytes a rank's computation can touch before what it touched
  /// earlier comes from memory again (MachineSchema.h's kCacheKey).
  double cacheBytes = machine::kDefaultCacheBytes;
};

/// The built-in machines' names, for help and errors.
llvm::StringRef builtinMachineNames();

/// A built-in machine (`cpu`: one 2-core Debian machine's calibration;
/// `h100`: an H100 SXM's datasheet rates, discounted to what kernels reach)
/// or a machine file's rates. Errors name the file and the key.
mlir::FailureOr<MachineRates> loadMachine(llvm::StringRef nameOrFile,
                                          std::string &error);

/// The predicted time of one rank's step.
struct TimePrediction {
  /// The step, from its first instruction to its last (seconds).
  double stepSeconds = 0;
  /// The computation alone (ATen calls and copies), the collectives alone
  /// (their own timeline), and the time the computation waited for them.
  double computeSeconds = 0, collectiveSeconds = 0, exposedSeconds = 0;
  /// Floating-point operations of the matrix products.
  double flops = 0;
  /// The all-reduce of the loss after the step (0 in a world of one rank
  /// or for a step without a loss), counted in the collectives' time and
  /// the time not overlapped.
  double lossSeconds = 0;
  /// How much later the collectives started than this rank was ready for
  /// them, waiting for the slowest rank (the machine's collective_skew
  /// times the computation since the ranks last waited together).
  double lagSeconds = 0;
  /// Calls whose time is a measured one.
  int64_t measuredCalls = 0;
  /// Of their time, what reading operands evicted from the caches adds
  /// (their measured cold time over the warm one, for the share of their
  /// operands' bytes last touched more than the machine's cache_bytes ago).
  double coldSeconds = 0;
  /// The predicted time of each instruction (a collective's: its own
  /// timeline's), in plan order.
  llvm::SmallVector<double> instructionSeconds;
};

/// Predicts the time of `step` (the single block of fsdp and aten ops the
/// plan emitter takes) on one rank of the module's world. `measuredSeconds`,
/// where given, has one entry per instruction of the block (its
/// terminator aside): an ATen call's or autograd_backward's measured time
/// with its operands warm in the caches, negative where it has none;
/// `coldSeconds`, where given, the same with its operands evicted first.
mlir::FailureOr<TimePrediction>
predictTime(mlir::ModuleOp module, mlir::func::FuncOp step,
            const MachineRates &machine,
            llvm::ArrayRef<double> measuredSeconds = {},
            llvm::ArrayRef<double> coldSeconds = {});

} // namespace fsdp

#endif // FSDP_ANALYSIS_COSTMODEL_H
