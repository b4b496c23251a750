//===- Passes.h - fsdp-opt passes -------------------------------*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_PASSES_H
#define FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace fsdp {

#define GEN_PASS_DECL
#include "fsdp/Transforms/Passes.h.inc"

/// The options of the `fsdp-train-step` pipeline: those of its passes.
struct TrainStepPipelineOptions
    : public mlir::PassPipelineOptions<TrainStepPipelineOptions> {
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("cross_entropy, mse or none"),
                           llvm::cl::init("cross_entropy")};
  ListOption<std::string> targets{
      *this, "targets", llvm::cl::desc("Target specs NAME:DIMSxDTYPE")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("sgd")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (negative: the optimizer's default)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
};

/// Loss, reverse-mode differentiation, optimizer: the whole training step.
void buildTrainStepPipeline(mlir::OpPassManager &pm,
                            const TrainStepPipelineOptions &options);

#define GEN_PASS_REGISTRATION
#include "fsdp/Transforms/Passes.h.inc"

/// Registers the passes and the named pipelines.
void registerTransformsPassesAndPipelines();

} // namespace fsdp

#endif // FSDP_TRANSFORMS_PASSES_H
