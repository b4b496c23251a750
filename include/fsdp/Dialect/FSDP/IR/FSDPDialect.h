//===- FSDPDialect.h - model state and FSDP ops -----------------*- C++ -*-===//
#ifndef FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.h.inc"
#include "fsdp/Dialect/FSDP/IR/FSDPEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

namespace fsdp {

// The discardable attributes passes exchange on ops of a step and on the
// module: set by one pass, read by the next.

/// Marks the first op of the backward (the loss gradient's seed), set by
/// fsdp-autodiff.
inline constexpr llvm::StringLiteral kBackwardStartAttr = "fsdp.backward_start";

/// Marks the first op of micro-batch k > 0's forward, set by fsdp-grad-accum:
/// a forward starts again there.
inline constexpr llvm::StringLiteral kMicroBatchStartAttr =
    "fsdp.micro_batch_start";

/// On an argument of @train_step: the micro-batch (0 .. K-1) it belongs to,
/// set by fsdp-grad-accum. Arguments without it belong to micro-batch 0.
inline constexpr llvm::StringLiteral kMicroBatchAttr = "fsdp.micro_batch";

/// A scheduling decision on an fsdp.all_gather.start (fsdp-prefetch):
/// start it right after the wait ("wait") or the free ("free") of the
/// previous gather of its phase.
inline constexpr llvm::StringLiteral kPrefetchAttr = "fsdp.prefetch";

/// A scheduling decision on the fsdp.wait of a reduction
/// (fsdp-limit-reductions): wait right before the step's i-th reduction
/// start (counting reduce-scatter and all-reduce starts in order).
inline constexpr llvm::StringLiteral kWaitBeforeAttr = "fsdp.wait_before";

/// The module attributes fsdp-shard records the ranks in: the world size
/// the step is compiled for, and how many consecutive ranks shard a flat
/// parameter (HYBRID_SHARD's group; the world otherwise); an unsharded
/// step has neither.
inline constexpr llvm::StringLiteral kWorldSizeAttr = "fsdp.world_size";
inline constexpr llvm::StringLiteral kShardGroupSizeAttr =
    "fsdp.shard_group_size";
/// The module attribute naming the communicator a sharded step will run
/// over when it is not Gloo ("nccl"): the memory model counts the buffers
/// that communicator's collectives hold. The plan is the same either way.
inline constexpr llvm::StringLiteral kBackendAttr = "fsdp.backend";
/// The module attribute naming the device a step is compiled for when it
/// is not the CPU ("cuda"), set by fsdp-autodiff: where eager PyTorch
/// computes differently there (dropout's draws, Adam's update order), the
/// step computes as it does; the plan says so (`device`).
inline constexpr llvm::StringLiteral kDeviceAttr = "fsdp.device";

/// The module attribute the importer records the module tree in ([path,
/// class] per module, preorder), which auto-wrap, activation checkpointing
/// and autodiff read.
inline constexpr llvm::StringLiteral kModulesAttr = "fsdp.modules";
/// On a model state op (a parameter): the FSDP unit (a module path) it is
/// flattened into, set by fsdp-auto-wrap; or, kIgnoredAttr, that it belongs
/// to an ignored module and stays unsharded.
inline constexpr llvm::StringLiteral kUnitAttr = "fsdp.unit";
inline constexpr llvm::StringLiteral kIgnoredAttr = "fsdp.ignored";
/// The module attribute the importer records a traced loss's target inputs
/// in, which fsdp-append-loss reads.
inline constexpr llvm::StringLiteral kTargetsAttr = "fsdp.targets";
/// An argument attribute of the step function: the input's name in the
/// data (and the plan's `inputs`).
inline constexpr llvm::StringLiteral kNameAttr = "fsdp.name";
/// The evaluation step: the function fsdp-append-loss makes it from (the
/// model imported in evaluation mode, `fsdp-opt --eval-model`), and, on the
/// module, why a step has none (the forward behaves differently in
/// training: "aten::dropout at blocks.0.drop"), which the plan states.
inline constexpr llvm::StringLiteral kEvalForwardName = "eval_forward";
inline constexpr llvm::StringLiteral kEvalStepName = "eval_step";
inline constexpr llvm::StringLiteral kNoEvalStepAttr = "fsdp.no_eval_step";
/// Activation checkpointing: on the RNG state a region saves before its
/// forward (kCheckpointAttr) and on the backward's recomputed copies of its
/// ops (kRecomputeAttr), the region's module path.
inline constexpr llvm::StringLiteral kCheckpointAttr = "fsdp.checkpoint";
inline constexpr llvm::StringLiteral kRecomputeAttr = "fsdp.recompute";

/// On an fsdp.wait, set by fsdp-shard: its result is a parameter's reduced
/// gradient (what the optimizer reads; the last wait of a two-stage
/// reduction), which the plan states for the runtime's count of gradient
/// bytes.
inline constexpr llvm::StringLiteral kReducedGradAttr = "fsdp.reduced_grad";

/// The module attribute a sharded step carries its strategy in (a
/// ShardingStrategyAttr), set by fsdp-shard.
inline constexpr llvm::StringLiteral kShardingAttr = "fsdp.sharding";
/// CPU offload: on a flat parameter or optimizer state, the state lives in
/// host memory (`fsdp-shard{offload-params}`, and the optimizer's state of
/// such a parameter).
inline constexpr llvm::StringLiteral kHostAttr = "fsdp.host";
/// On a flat parameter: its optimizer state (not the shard) lives in host
/// memory, where the optimizer updates a copy of the shard.
inline constexpr llvm::StringLiteral kHostOptimAttr = "fsdp.host_optim";

/// A result attribute of the step function: the output is a per-step
/// metric with this name (`lr`), which `fsdp-run --metrics` reports.
inline constexpr llvm::StringLiteral kMetricAttr = "fsdp.metric";

/// On an op of a step, set by fsdp-optimizer on every op it adds (state
/// reads and updates, clipping, the gradient scaler's checks, OSS's gather
/// of updated shards): the op belongs to the optimizer's phase wherever it
/// sits (updates follow each gradient, interleaved with the backward).
inline constexpr llvm::StringLiteral kOptimizerOpAttr = "fsdp.optimizer_op";

/// The module attribute fsdp-optimizer records its torch.optim settings in
/// (a dictionary: `name` and the param group's fields, `lr`, `momentum`,
/// `betas`, ...), which a plan carries for checkpoints in torch.optim's
/// format.
inline constexpr llvm::StringLiteral kOptimizerAttr = "fsdp.optimizer";
/// GradScaler's settings where the step scales its loss (for checkpoints
/// in its state_dict's format).
inline constexpr llvm::StringLiteral kGradScalerAttr = "fsdp.grad_scaler";

/// The module attribute that says which checkpoints fsdp-run writes by
/// default (FULL_STATE_DICT or SHARDED_STATE_DICT: an Accelerate file's
/// fsdp_state_dict_type).
inline constexpr llvm::StringLiteral kStateDictTypeAttr =
    "fsdp.state_dict_type";

/// The module attribute the importer records, as [name, bytes] pairs, the
/// module tensors whose values it read from the archive (tensors used as
/// constants that are neither parameters nor buffers); the values of
/// parameters and buffers are never read at compile time.
inline constexpr llvm::StringLiteral kValuesReadAttr = "fsdp.values_read";

} // namespace fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
