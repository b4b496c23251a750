//===- StepAnalysis.h - order, phase and aliasing in a step -----*- C++ -*-===//
//
// What the passes after fsdp-autodiff ask of a training step: where an op
// runs (its position among the top-level ops of the step's body), in which
// phase (forward, backward, optimizer), and which values share a tensor's
// storage (its views). One implementation, used by
// fsdp-shard, the scheduling passes and fsdp-verify-plan.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_STEPANALYSIS_H
#define FSDP_ANALYSIS_STEPANALYSIS_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallVector.h"

namespace fsdp {

/// Where an op runs: before the loss gradient's seed, or from it on (the
/// backward). With gradient accumulation the phases alternate: each
/// micro-batch's forward starts at an op marked fsdp.micro_batch_start, its
/// backward at its seed. The optimizer's ops (marked fsdp.optimizer_op by
/// fsdp-optimizer: its updates follow each gradient, interleaved with the
/// backward) are of its phase wherever they sit.
enum class Phase { Forward, Backward, Optimizer };

/// "forward", "backward" or "optimizer", for reports.
inline llvm::StringRef phaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Optimizer:
    return "optimizer";
  }
  return "";
}

/// Positions of the ops of a step's body, and its phases. Positions are
/// those of the body when the analysis was built (or last recomputed): a
/// pass that moves ops calls recompute() before asking again.
class StepOrder {
public:
  explicit StepOrder(mlir::Block &body);

  /// Numbers the body's ops again (after ops were moved, added or erased).
  void recompute();

  /// The position of `op`, or of its ancestor among the body's ops; -1 if
  /// `op` is not in the body.
  int64_t at(mlir::Operation *op) const;
  /// The phase `op` runs in.
  Phase phase(mlir::Operation *op) const;
  /// The micro-batch `op` runs in (0 without gradient accumulation): how
  /// many fsdp.micro_batch_start marks come at or before it.
  int64_t microBatch(mlir::Operation *op) const;
  /// The first op of the (first micro-batch's) backward (marked
  /// fsdp.backward_start), or null.
  mlir::Operation *backwardStart() const { return backward; }
  mlir::Block &getBody() const { return body; }

private:
  mlir::Block &body;
  llvm::DenseMap<mlir::Operation *, int64_t> position;
  mlir::Operation *backward = nullptr;
  /// Where a phase starts: positions, ascending, and the phase from there.
  llvm::SmallVector<std::pair<int64_t, Phase>> boundaries;
  /// Positions of the fsdp.micro_batch_start marks, ascending.
  llvm::SmallVector<int64_t> microBatchStarts;
};

/// Whether `user`'s results share the storage of its operand `operand`: an
/// fsdp.view of a buffer, or an ATen view (a non-writing op that may alias
/// its first argument, such as aten::t or aten::view) of its first operand.
bool isViewOf(mlir::Operation *user, mlir::Value operand);

/// The operand index of each schema argument position of `call` (a
/// `Tensor[]` argument's first element's).
llvm::SmallVector<int64_t> argumentOperands(aten::CallOp call);

/// Whether `call`'s schema results return the arguments it writes (an
/// in-place op, `aten::add_`, or an out= overload) rather than values of
/// their own.
bool returnsWrittenArguments(aten::CallOp call);

/// `roots` and every value that shares their storage through views (of
/// views), in the order found: roots first.
llvm::SetVector<mlir::Value> viewClosure(llvm::ArrayRef<mlir::Value> roots);

/// The wait of a collective start (its future's one user), or null.
WaitOp waitOf(CollectiveStartOp start);

/// One gather of a sharded unit's parameters for the forward or the
/// backward: the read of the rank's shard, the all-gather's start, its wait
/// and the free of the gathered buffer (null if never freed).
struct Gather {
  GetOp read;
  ToDeviceOp copy; // CPU offload: the shard's copy to the device, or null
  AllGatherStartOp start;
  WaitOp wait;
  FreeOp free;
  Phase phase;
};

/// The gathers of the step's body that bring sharded parameters to their
/// uses, in start order. Not among them: the gathers of updated shards into
/// a replicated flat parameter (OSS, SHARDED_DDP), which feed its update.
llvm::SmallVector<Gather> collectGathers(const StepOrder &order);

/// How many ranks a collective over `group` spans: the world, a shard group
/// of `shardGroupSize` ranks, or the replicas of a shard (world / shard).
int64_t commGroupSize(CommGroup group, int64_t worldSize,
                      int64_t shardGroupSize);

/// CPU offload: whether the state symbol `name` (from `op`) lives in host
/// memory (`fsdp.host`). Callers that ask for many names pass `symbols`,
/// so that each lookup is not a walk of the module.
bool isHostState(mlir::Operation *op, mlir::FlatSymbolRefAttr name,
                 mlir::SymbolTableCollection *symbols = nullptr);

/// CPU offload: the values of `body` that live in host memory: reads of
/// host state, `fsdp.to_host` results, and what ATen computes from them
/// (a call with a host operand runs on the host), constants read only on
/// the host. Everything else is on the device.
llvm::DenseSet<mlir::Value> hostValues(mlir::Block &body);

} // namespace fsdp

#endif // FSDP_ANALYSIS_STEPANALYSIS_H
