//===- MemoryModel.h - the bytes a rank holds during a step -----*- C++ -*-===//
//
// The memory model of a plan: the bytes of live tensor storages on one rank
// after every instruction of the step, counted as fsdp-run counts them (each
// storage once, however many values and collectives hold it; views share
// their base's storage; an in-place write reuses its argument's storage when
// nothing else holds it and the argument is not a view, whose base
// autograd's view metadata keeps alive, and writes a copy otherwise). Its
// peak is the
// prediction `fsdp-opt --memory-report` prints; `fsdp-run --metrics`
// measures the same quantity, and the two are equal to the byte.
//
// Which results share an operand's storage is decided as ATen decides it,
// from the operands' strides: a view op always aliases; aten::contiguous,
// aten::reshape and aten::to alias when they can (a contiguous input, a
// shape the strides can view, the same dtype) and copy otherwise. Strides
// are tracked through views, pointwise kernels lay out their results as
// ATen's TensorIterator does, and convolutions compute in NHWC where their
// input or weight is laid out so, so that these decisions are exact. A
// kernel's own result has a storage of its own of numel x element bytes,
// but for the losses that reduce in their unreduced buffer (mse_loss,
// smooth_l1_loss, binary_cross_entropy, soft_margin_loss) and the results
// an output mask leaves undefined (no storage).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_MEMORYMODEL_H
#define FSDP_ANALYSIS_MEMORYMODEL_H

#include "fsdp/Analysis/StepAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <string>
#include <vector>

namespace fsdp {

/// What a storage holds, for the breakdown of the peak.
enum class MemoryCategory {
  /// Parameters (or their shards), buffers and optimizer state, and the new
  /// values the optimizer writes into them.
  State,
  /// The step's batch.
  Inputs,
  /// Units' parameters gathered from their shards.
  GatheredParameters,
  /// Values the forward computes (at a backward peak: those kept for the
  /// backward).
  Activations,
  /// Gradients: computed for a reduction or the optimizer, and reduced.
  Gradients,
  /// What a reduction holds in flight besides its input (send and receive
  /// buffers).
  CommunicationBuffers,
  /// Everything else the backward and the optimizer compute.
  Temporaries,
};
constexpr size_t kNumMemoryCategories = 7;
llvm::StringRef memoryCategoryName(MemoryCategory category);

/// The bytes of one element of type `element` (an i1, a bool, takes a
/// byte; a complex number two of its parts).
int64_t elementBytes(mlir::Type element);

/// The bytes of a tensor type's storage: elements times their size.
int64_t tensorBytes(mlir::Type type);

/// The predicted memory of one rank during one step.
struct MemoryPrediction {
  /// The most bytes live at any moment of the step, and where: the
  /// instruction (its index in the plan) during which they are reached.
  int64_t peakBytes = 0;
  int64_t peakInstruction = -1;
  mlir::Operation *peakOp = nullptr;
  /// The live bytes at the peak, by category (they add up to peakBytes).
  std::array<int64_t, kNumMemoryCategories> breakdown{};
  /// Bytes live before the first instruction (state and batch).
  int64_t startBytes = 0;
  /// CPU offload: the most bytes live in host memory at any moment
  /// (offloaded state, gradient shards copied back, the optimizer's
  /// temporaries); the other fields count device memory only.
  int64_t hostPeakBytes = 0;
  /// CPU offload: host bytes live before the first instruction, and the
  /// most during each.
  int64_t hostStartBytes = 0;
  llvm::SmallVector<int64_t> hostInstructionPeak;
  /// Bytes live after each instruction, and the most during it.
  llvm::SmallVector<int64_t> timeline;
  llvm::SmallVector<int64_t> instructionPeak;
  /// The bytes of the step's constants live at each instruction's peak (in
  /// either memory, with CPU offload): fsdp-run builds them once, before
  /// the first step, so the allocator's view of a step (fsdp-run's
  /// allocator_peak_bytes) does not count them.
  llvm::SmallVector<int64_t> constantBytes;

  /// A tensor operand as a kernel receives it.
  struct OperandLayout {
    llvm::SmallVector<int64_t> sizes, strides; // strides in elements
    mlir::Type element;
  };
  /// Per instruction, the tensor operands of an ATen call in operand order
  /// (of an autograd_backward, its call's then the results' gradients;
  /// empty for other instructions): recorded when predictMemory is asked
  /// to, for running the call's kernel on operands laid out as the step
  /// has them (measuring its workspace).
  std::vector<llvm::SmallVector<OperandLayout, 4>> callOperands;

  /// The peak while one unit's parameters are gathered (from the
  /// all-gather's start to the free of the gathered buffer), per phase.
  struct Unit {
    std::string unit;
    Phase phase;
    int64_t microBatch; // with gradient accumulation; 0 without
    int64_t start, end, peakBytes;
  };
  llvm::SmallVector<Unit> units;
};

/// Predicts the memory of `step` (a function of `module` in the form the
/// plan emitter takes: a single block of fsdp and aten ops) on one rank of
/// the module's world. Fails with an error at the op it cannot model.
mlir::FailureOr<MemoryPrediction>
predictMemory(mlir::ModuleOp module, mlir::func::FuncOp step,
              bool operandLayouts = false);

} // namespace fsdp

#endif // FSDP_ANALYSIS_MEMORYMODEL_H
