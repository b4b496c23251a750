//===- Pipelines.cpp - named pipelines and registration --------------------===//

#include "fsdp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace fsdp;

namespace {

/// The device a step is compiled for: `device`, else a GPU where its ranks
/// talk over NCCL, else the CPU.
std::string deviceOf(const TrainStepPipelineOptions &options) {
  return options.device.empty() ? std::string("cpu") : options.device.getValue();
}
std::string deviceOf(const FSDPPipelineOptions &options) {
  if (!options.device.empty())
    return options.device.getValue();
  return options.backend == "nccl" ? "cuda" : "cpu";
}

template <typename Options>
void addLossAndBackward(OpPassManager &pm, const Options &options) {
  AppendLossOptions loss;
  loss.loss = options.loss;
  loss.targets.assign(options.targets.begin(), options.targets.end());
  pm.addPass(createAppendLoss(loss));
  AutodiffOptions autodiff;
  autodiff.device = deviceOf(options);
  pm.addPass(createAutodiff(autodiff));
}

template <typename Options>
void addActivationCheckpointing(OpPassManager &pm, const Options &options) {
  ActivationCheckpointingOptions ac;
  ac.allUnits = options.activationCheckpointing;
  ac.classes.assign(options.acClasses.begin(), options.acClasses.end());
  ac.modules.assign(options.acModules.begin(), options.acModules.end());
  pm.addPass(createActivationCheckpointing(ac));
}

template <typename Options>
void addGradAccum(OpPassManager &pm, const Options &options) {
  GradAccumOptions accum;
  accum.microBatches = options.gradAccum;
  pm.addPass(createGradAccum(accum));
}

template <typename Options>
void addOptimizer(OpPassManager &pm, const Options &options) {
  OptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.momentum = options.momentum;
  optimizer.nesterov = options.nesterov;
  optimizer.dampening = options.dampening;
  optimizer.maximize = options.maximize;
  optimizer.amsgrad = options.amsgrad;
  optimizer.maxGradNorm = options.maxGradNorm;
  optimizer.lrSchedule = options.lrSchedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.totalSteps = options.totalSteps;
  optimizer.weightDecay = options.weightDecay;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.gradScaler = options.gradScaler;
  optimizer.initScale = options.initScale;
  optimizer.growthFactor = options.growthFactor;
  optimizer.backoffFactor = options.backoffFactor;
  optimizer.growthInterval = options.growthInterval;
  pm.addPass(createOptimizer(optimizer));
}

} // namespace

void fsdp::buildTrainStepPipeline(OpPassManager &pm,
                                  const TrainStepPipelineOptions &options) {
  addLossAndBackward(pm, options);
  addActivationCheckpointing(pm, options);
  addGradAccum(pm, options);
  addOptimizer(pm, options);
}

void fsdp::buildFSDPPipeline(OpPassManager &pm,
                             const FSDPPipelineOptions &options) {
  addLossAndBackward(pm, options);
  buildShardedStepPipeline(pm, options);
}

void fsdp::buildLossAndBackwardPipeline(OpPassManager &pm,
                                       const FSDPPipelineOptions &options) {
  addLossAndBackward(pm, options);
}

void fsdp::buildShardedStepPipeline(OpPassManager &pm,
                                    const FSDPPipelineOptions &options) {
  AutoWrapOptions wrap;
  wrap.policy = options.autoWrap;
  wrap.minNumParams = options.minNumParams;
  wrap.wrapClasses.assign(options.wrapClasses.begin(),
                          options.wrapClasses.end());
  wrap.wrapModules.assign(options.wrapModules.begin(),
                          options.wrapModules.end());
  wrap.ignoreModules.assign(options.ignoreModules.begin(),
                            options.ignoreModules.end());
  pm.addPass(createAutoWrap(wrap));
  addActivationCheckpointing(pm, options);
  ShardOptions shard;
  shard.sharding = options.sharding;
  shard.worldSize = options.worldSize;
  shard.shardGroupSize = options.shardGroupSize;
  shard.hybridReduction = options.hybridReduction;
  shard.backend = options.backend;
  shard.reduceDtype = options.reduceDtype;
  shard.offloadParams = options.offloadParams;
  shard.offloadUnits.assign(options.offloadUnits.begin(),
                            options.offloadUnits.end());
  shard.offloadOptimUnits.assign(options.offloadOptimUnits.begin(),
                                 options.offloadOptimUnits.end());
  pm.addPass(createShard(shard));
  addGradAccum(pm, options);
  addOptimizer(pm, options);
  PrefetchOptions prefetch;
  prefetch.backwardPrefetch = options.backwardPrefetch;
  prefetch.forwardPrefetch = options.forwardPrefetch;
  pm.addPass(createPrefetch(prefetch));
  LimitAllGathersOptions limit;
  limit.limit = options.limitAllGathers;
  pm.addPass(createLimitAllGathers(limit));
  LimitReductionsOptions reductions;
  reductions.limit = options.limitReductions;
  pm.addPass(createLimitReductions(reductions));
  pm.addPass(createApplySchedule());
  pm.addPass(createVerifyPlan());
}

void fsdp::registerTransformsPassesAndPipelines() {
  registerFSDPPasses();
  PassPipelineRegistration<TrainStepPipelineOptions>(
      "fsdp-train-step",
      "The whole training step: loss, reverse-mode differentiation, "
      "activation checkpointing, gradient accumulation, optimizer update "
      "(fsdp-append-loss, fsdp-autodiff, fsdp-activation-checkpointing, "
      "fsdp-grad-accum, fsdp-optimizer)",
      buildTrainStepPipeline);
  PassPipelineRegistration<FSDPPipelineOptions>(
      "fsdp-fully-shard",
      "The training step, fully sharded as PyTorch FSDP shards it: loss, "
      "reverse-mode differentiation, auto-wrap, flat parameters and "
      "collectives, the optimizer on each rank's shards, the all-gathers' "
      "schedule, verification (fsdp-append-loss, fsdp-autodiff, "
      "fsdp-auto-wrap, fsdp-activation-checkpointing, fsdp-shard, "
      "fsdp-grad-accum, fsdp-optimizer, "
      "fsdp-prefetch, fsdp-limit-all-gathers, fsdp-limit-reductions, "
      "fsdp-apply-schedule, fsdp-verify-plan)",
      buildFSDPPipeline);
}
