//===- Gradients.h - one gradient rule per ATen op --------------*- C++ -*-===//
//
// The registry reverse-mode differentiation reads: for each ATen overload, how
// to compute the gradients of its tensor arguments from the gradients of its
// results, written with ATen ops and ATen's own backward kernels (the formulas
// of PyTorch's derivatives.yaml). Adding an op is one entry here.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_ATEN_GRADIENTS_H
#define FSDP_DIALECT_ATEN_GRADIENTS_H

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"

#include "llvm/ADT/StringRef.h"

namespace fsdp::aten {

/// What a rule sees and fills in: the forward call, the gradients of its
/// results, and one gradient slot per operand.
class GradientContext {
public:
  GradientContext(ATenBuilder &builder, CallOp op,
                  llvm::ArrayRef<mlir::Value> resultGrads,
                  llvm::ArrayRef<bool> operandNeedsGrad);

  ATenBuilder &b;
  CallOp op;
  CallArgs args;

  /// The gradient of result `i`, or null if nothing downstream needs it.
  mlir::Value grad(unsigned i = 0) const;
  /// The gradient of result `i`, zeros if it has none (list results).
  mlir::Value gradOrZeros(unsigned i);
  mlir::Value result(unsigned i = 0) { return op.getResult(i); }
  /// True if tensor argument `arg` (schema position) needs a gradient.
  bool needs(unsigned arg) const;
  /// True if element `k` of list argument `arg` needs a gradient.
  bool needsListElement(unsigned arg, unsigned k) const;
  /// Sets the gradient of tensor argument `arg` (ignored if none is needed).
  void set(unsigned arg, mlir::Value g);
  void setListElement(unsigned arg, unsigned k, mlir::Value g);
  /// An error at the forward op; returns failure.
  mlir::LogicalResult fail(const llvm::Twine &message);
  /// The rule does not cover this call (a padding mode, channel dropout in
  /// training): libtorch's autograd differentiates it instead, as it does a
  /// call with no rule (`aten.autograd_backward`). Returns success.
  mlir::LogicalResult autograd() {
    usesAutograd = true;
    return mlir::success();
  }
  bool wantsAutograd() const { return usesAutograd; }

  llvm::ArrayRef<mlir::Value> operandGrads() const { return grads; }

private:
  int64_t listOperand(unsigned arg, unsigned k) const;

  llvm::SmallVector<mlir::Value> resultGrads;
  llvm::SmallVector<bool> needsGrad;
  llvm::SmallVector<mlir::Value> grads;
  bool usesAutograd = false;
};

/// What a step is differentiated for, where eager PyTorch computes
/// differently on it.
struct Target {
  bool cuda = false; // a GPU: dropout is CUDA's fused native_dropout
};

struct GradientRule {
  /// Emits the backward of the call at the builder's insertion point.
  mlir::LogicalResult (*backward)(GradientContext &) = nullptr;
  /// Rewrites the forward call, before differentiation, into ops that keep
  /// what the backward needs (batch_norm into native_batch_norm, which returns
  /// the saved statistics). Null if the call is differentiated as it is.
  /// Replaces every use of the old call's results and erases it.
  mlir::LogicalResult (*prepare)(ATenBuilder &, CallOp,
                                 const Target &) = nullptr;
};

/// The rule for `overload`; an in-place overload (`aten::relu_`) falls back
/// to its functional form (`aten::relu`). Null if there is none.
const GradientRule *lookupGradient(llvm::StringRef overload);

/// Every overload with a rule, sorted (for `--list-gradient-rules`).
llvm::SmallVector<llvm::StringRef> gradientRuleNames();

} // namespace fsdp::aten

#endif // FSDP_DIALECT_ATEN_GRADIENTS_H
