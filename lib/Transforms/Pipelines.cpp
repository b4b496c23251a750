//===- Pipelines.cpp - named pipelines and registration --------------------===//

#include "fsdp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void fsdp::buildTrainStepPipeline(OpPassManager &pm,
                                  const TrainStepPipelineOptions &options) {
  AppendLossOptions loss;
  loss.loss = options.loss;
  loss.targets.assign(options.targets.begin(), options.targets.end());
  pm.addPass(createAppendLoss(loss));
  pm.addPass(createAutodiff());
  OptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.momentum = options.momentum;
  optimizer.nesterov = options.nesterov;
  optimizer.weightDecay = options.weightDecay;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  pm.addPass(createOptimizer(optimizer));
}

void fsdp::registerTransformsPassesAndPipelines() {
  registerFSDPPasses();
  PassPipelineRegistration<TrainStepPipelineOptions>(
      "fsdp-train-step",
      "The whole training step: loss, reverse-mode differentiation, "
      "optimizer update (fsdp-append-loss, fsdp-autodiff, fsdp-optimizer)",
      buildTrainStepPipeline);
}
