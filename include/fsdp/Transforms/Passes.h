//===- Passes.h - fsdp-opt passes -------------------------------*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_PASSES_H
#define FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Transforms/StepDefaults.h"
#include "fsdp/runtime/PlanSchema.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace fsdp {

/// The most ranks a plan can be compiled for: the runtime's bound (its
/// ranks are C ints, as in c10d and NCCL).
inline constexpr int64_t kMaxWorldSize = plan::kMaxWorldSize;

/// The sharding strategies fsdp-shard knows: PyTorch FSDP's and fairscale's
/// names, as a message lists them.
inline constexpr const char *kShardingStrategies =
    "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, OSS or SHARDED_DDP";
inline bool isShardingStrategy(llvm::StringRef name) {
  return symbolizeShardingStrategy(name).has_value();
}

/// PyTorch FSDP's BackwardPrefetch values, as a message lists them.
inline constexpr const char *kBackwardPrefetchValues =
    "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH";
inline bool isBackwardPrefetch(llvm::StringRef name) {
  return symbolizeBackwardPrefetch(name).has_value();
}

#define GEN_PASS_DECL
#include "fsdp/Transforms/Passes.h.inc"

/// The options of the `fsdp-train-step` pipeline: those of its passes.
/// `fsdp-fully-shard` adds FSDP's own (FSDPPipelineOptions).
template <typename Derived>
struct TrainStepOptionsBase : public mlir::PassPipelineOptions<Derived> {
  template <typename T> using Opt = mlir::detail::PassOptions::Option<T>;
  template <typename T>
  using ListOpt = mlir::detail::PassOptions::ListOption<T>;

  // Declared by hand: fsdp-opt's --loss and --optimizer have no default
  // (they ask for the training step).
  Opt<std::string> loss{*this, "loss",
                        llvm::cl::desc("cross_entropy, mse or none"),
                        llvm::cl::init(StepDefaults::loss())};
  Opt<std::string> optimizer{*this, "optimizer",
                             llvm::cl::desc("sgd, adam or adamw"),
                             llvm::cl::init(StepDefaults::optimizer())};
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  Opt<TYPE> FIELD{*this, NAME, llvm::cl::desc(HELP), llvm::cl::init(DEFAULT)};
#define FSDP_TRAIN_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  ListOpt<std::string> FIELD{*this, NAME, llvm::cl::desc(HELP)};
#include "fsdp/Transforms/StepOptions.def"
};

struct TrainStepPipelineOptions
    : TrainStepOptionsBase<TrainStepPipelineOptions> {};

/// `fsdp-fully-shard`: the training step and PyTorch FSDP's choices, with
/// FSDP's names.
struct FSDPPipelineOptions : TrainStepOptionsBase<FSDPPipelineOptions> {
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  Opt<TYPE> FIELD{*this, NAME, llvm::cl::desc(HELP), llvm::cl::init(DEFAULT)};
#define FSDP_SHARD_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  ListOpt<std::string> FIELD{*this, NAME, llvm::cl::desc(HELP)};
#include "fsdp/Transforms/StepOptions.def"
  /// The plan's dtype name (bf16, f16, f32) gradients are reduced in; fsdp-opt
  /// derives it from --mixed-precision and --reduce-dtype.
  Opt<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Mixed precision: bf16, f16 or f32 (empty: the "
                     "gradient's own type)"),
      llvm::cl::init("")};
};

/// Loss, reverse-mode differentiation, optimizer: the whole training step.
void buildTrainStepPipeline(mlir::OpPassManager &pm,
                            const TrainStepPipelineOptions &options);

/// The training step, fully sharded: loss, differentiation, auto-wrap,
/// sharding and collectives, the optimizer on the shards, the schedule of
/// the all-gathers, verification.
void buildFSDPPipeline(mlir::OpPassManager &pm,
                       const FSDPPipelineOptions &options);

/// The part of buildFSDPPipeline up to differentiation: the loss and the
/// backward.
void buildLossAndBackwardPipeline(mlir::OpPassManager &pm,
                                  const FSDPPipelineOptions &options);

/// The part of buildFSDPPipeline after differentiation: auto-wrap, sharding,
/// the optimizer, the schedule, verification.
void buildShardedStepPipeline(mlir::OpPassManager &pm,
                              const FSDPPipelineOptions &options);

#define GEN_PASS_REGISTRATION
#include "fsdp/Transforms/Passes.h.inc"

/// Registers the passes and the named pipelines.
void registerTransformsPassesAndPipelines();

/// The path of the module an op runs in (the innermost name in its
/// location, the importer's scope); none where its location names none.
std::optional<std::string> modulePathOf(mlir::Operation *op);

/// True if module `path` is `ancestor` or lies under it ("" is the root).
bool isWithinModule(llvm::StringRef path, llvm::StringRef ancestor);

/// The module tree the importer recorded (`fsdp.modules`): (path, class)
/// per module, in preorder; entries that are not two strings are skipped.
llvm::SmallVector<std::pair<std::string, std::string>>
moduleTree(mlir::ModuleOp module);

/// A class named NAME matches its full TorchScript name or its last
/// component (`Block` for `models.Block`), as a user writes it.
bool moduleClassMatches(llvm::StringRef cls, llvm::StringRef name);

/// The module an op runs in, for messages: `'rnn'
/// (torch.nn.modules.rnn.LSTM)`, or "" where its location names none.
std::string describeModule(mlir::Operation *op);

/// The overload and the module a call runs in, for messages:
/// `aten::lstm.input in module 'rnn' (torch.nn.modules.rnn.LSTM)`.
std::string describeCall(aten::CallOp call);

} // namespace fsdp

#endif // FSDP_TRANSFORMS_PASSES_H
