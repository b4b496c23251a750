//===- Passes.h - fsdp-opt passes -------------------------------*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_PASSES_H
#define FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
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
  return name == "BACKWARD_PRE" || name == "BACKWARD_POST" ||
         name == "NO_PREFETCH";
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

  Opt<std::string> loss{*this, "loss",
                        llvm::cl::desc("cross_entropy, mse or none"),
                        llvm::cl::init("cross_entropy")};
  ListOpt<std::string> targets{
      *this, "targets", llvm::cl::desc("Target specs NAME:DIMSxDTYPE")};
  Opt<bool> activationCheckpointing{
      *this, "activation-checkpointing",
      llvm::cl::desc("Checkpoint every FSDP unit but the root"),
      llvm::cl::init(false)};
  ListOpt<std::string> acClasses{
      *this, "ac-class",
      llvm::cl::desc("Checkpoint the modules of these classes")};
  ListOpt<std::string> acModules{
      *this, "ac-module",
      llvm::cl::desc("Checkpoint the modules at these paths")};
  Opt<std::string> optimizer{*this, "optimizer",
                             llvm::cl::desc("sgd, adam or adamw"),
                             llvm::cl::init("sgd")};
  Opt<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                 llvm::cl::init(1e-3)};
  Opt<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                       llvm::cl::init(0.0)};
  Opt<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov"),
                     llvm::cl::init(false)};
  Opt<double> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                        llvm::cl::init(0.0)};
  Opt<bool> maximize{*this, "maximize",
                     llvm::cl::desc("Maximize the objective"),
                     llvm::cl::init(false)};
  Opt<bool> amsgrad{*this, "amsgrad", llvm::cl::desc("Adam/AdamW AMSGrad"),
                    llvm::cl::init(false)};
  Opt<int64_t> gradAccum{
      *this, "grad-accum",
      llvm::cl::desc("Micro-batches accumulated per optimizer step"),
      llvm::cl::init(1)};
  Opt<double> maxGradNorm{*this, "max-grad-norm",
                          llvm::cl::desc("Gradient clipping (0: none)"),
                          llvm::cl::init(0.0)};
  Opt<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("constant, linear or cosine (empty: none)"),
      llvm::cl::init("")};
  Opt<int64_t> warmupSteps{*this, "warmup-steps",
                           llvm::cl::desc("Warmup steps"), llvm::cl::init(0)};
  Opt<int64_t> totalSteps{*this, "total-steps",
                          llvm::cl::desc("Total steps of the schedule"),
                          llvm::cl::init(0)};
  Opt<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (negative: the optimizer's default)"),
      llvm::cl::init(-1.0)};
  Opt<double> beta1{*this, "beta1", llvm::cl::desc("Adam/AdamW beta1"),
                    llvm::cl::init(0.9)};
  Opt<double> beta2{*this, "beta2", llvm::cl::desc("Adam/AdamW beta2"),
                    llvm::cl::init(0.999)};
  Opt<double> eps{*this, "eps", llvm::cl::desc("Adam/AdamW epsilon"),
                  llvm::cl::init(1e-8)};
  Opt<bool> gradScaler{*this, "grad-scaler",
                       llvm::cl::desc("Dynamic loss scaling (ShardedGradScaler)"),
                       llvm::cl::init(false)};
  Opt<double> initScale{*this, "init-scale",
                        llvm::cl::desc("The gradient scaler's initial scale"),
                        llvm::cl::init(65536.0)};
  Opt<double> growthFactor{*this, "growth-factor",
                           llvm::cl::desc("The scale's growth factor"),
                           llvm::cl::init(2.0)};
  Opt<double> backoffFactor{*this, "backoff-factor",
                            llvm::cl::desc("The scale's backoff factor"),
                            llvm::cl::init(0.5)};
  Opt<int64_t> growthInterval{
      *this, "growth-interval",
      llvm::cl::desc("Consecutive good steps before the scale grows"),
      llvm::cl::init(2000)};
};

struct TrainStepPipelineOptions
    : TrainStepOptionsBase<TrainStepPipelineOptions> {};

/// `fsdp-fully-shard`: the training step and PyTorch FSDP's choices, with
/// FSDP's names.
struct FSDPPipelineOptions : TrainStepOptionsBase<FSDPPipelineOptions> {
  Opt<std::string> sharding{
      *this, "sharding-strategy",
      llvm::cl::desc(kShardingStrategies),
      llvm::cl::init("FULL_SHARD")};
  Opt<int64_t> worldSize{*this, "world-size",
                         llvm::cl::desc("Number of ranks"), llvm::cl::init(1)};
  Opt<int64_t> shardGroupSize{
      *this, "shard-group-size",
      llvm::cl::desc("HYBRID_SHARD: ranks per shard group"),
      llvm::cl::init(0)};
  Opt<std::string> hybridReduction{
      *this, "hybrid-reduction",
      llvm::cl::desc("HYBRID_SHARD's reduction: ordered or two-stage"),
      llvm::cl::init("ordered")};
  Opt<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Mixed precision: bf16, f16 or f32 (empty: the "
                     "gradient's own type)"),
      llvm::cl::init("")};
  Opt<bool> offloadParams{
      *this, "offload-params",
      llvm::cl::desc("CPU offload: parameter shards, gradients and "
                     "optimizer state in host memory"),
      llvm::cl::init(false)};
  ListOpt<std::string> offloadUnits{
      *this, "offload-units",
      llvm::cl::desc("CPU offload of these units (module paths)")};
  ListOpt<std::string> offloadOptimUnits{
      *this, "offload-optim-units",
      llvm::cl::desc("CPU offload of these units' optimizer state")};
  Opt<std::string> autoWrapPolicy{
      *this, "auto-wrap-policy",
      llvm::cl::desc("size, class, modules or none"), llvm::cl::init("none")};
  Opt<int64_t> minNumParams{
      *this, "min-num-params",
      llvm::cl::desc("size policy: parameters that make a unit"),
      llvm::cl::init(100000000)};
  ListOpt<std::string> wrapClasses{
      *this, "wrap-class", llvm::cl::desc("class policy: unit classes")};
  ListOpt<std::string> wrapModules{
      *this, "wrap-module", llvm::cl::desc("modules policy: unit paths")};
  ListOpt<std::string> ignoreModules{
      *this, "ignore-module",
      llvm::cl::desc("Modules whose parameters stay whole and replicated")};
  Opt<std::string> backwardPrefetch{
      *this, "backward-prefetch", llvm::cl::desc(kBackwardPrefetchValues),
      llvm::cl::init("BACKWARD_PRE")};
  Opt<bool> forwardPrefetch{
      *this, "forward-prefetch",
      llvm::cl::desc("Prefetch the next unit's forward all-gather"),
      llvm::cl::init(false)};
  Opt<int64_t> limitAllGathers{
      *this, "limit-all-gathers",
      llvm::cl::desc("Most gathered buffers in flight or alive when a "
                     "prefetched all-gather starts (0: no limit)"),
      llvm::cl::init(2)};
  Opt<int64_t> limitReductions{
      *this, "limit-reductions",
      llvm::cl::desc("Most gradient reductions in flight (0: no bound)"),
      llvm::cl::init(2)};
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
