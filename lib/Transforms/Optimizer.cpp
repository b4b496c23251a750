//===- Optimizer.cpp - fsdp.grad becomes the optimizer's update ------------===//
//
// The update rules of torch.optim.SGD, Adam and AdamW in their single-tensor
// form, op for op, so that the arithmetic (and its rounding) is PyTorch's.
// Optimizer state is zero before the first step: for SGD's momentum buffer
// without dampening, `0 * momentum + grad` is exactly PyTorch's first-step
// copy of the gradient; with dampening the step count selects the copy.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>

namespace fsdp {
#define GEN_PASS_DEF_OPTIMIZER
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct Optimizer : fsdp::impl::OptimizerBase<Optimizer> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module);
  LogicalResult checkOptions(ModuleOp module);

  /// Declares optimizer state `name` (zero at the start).
  FlatSymbolRefAttr declareState(StringRef name, RankedTensorType type,
                                 FlatSymbolRefAttr param);
  Value read(OpBuilder &b, Location loc, FlatSymbolRefAttr name,
             RankedTensorType type) {
    return GetOp::create(b, loc, type, name);
  }

  /// The parameter's new value: a replicated flat parameter's updated
  /// shards are gathered back into the whole that every rank holds.
  void updateParam(OpBuilder &b, GradOp grad, Value updated);
  void sgd(aten::ATenBuilder &b, GradOp grad, Value param);
  void adam(aten::ATenBuilder &b, GradOp grad, Value param);
  /// The step count (f64, `optim:step`), incremented once per step before
  /// the first update.
  Value stepCount(aten::ATenBuilder &b);
  /// Adam's per-step scalars, computed once before the first update.
  void adamStep(aten::ATenBuilder &b);
  bool isAdam() const { return optimizer == "adam" || optimizer == "adamw"; }

  OpBuilder *symbols = nullptr; // where state symbols are declared
  SymbolTable *symbolTable = nullptr;
  double decay = 0.0;
  Value negStepSize, bias2Sqrt;
  // SGD with dampening: true on the first step (the buffer copies d_p).
  Value firstStep;
};

LogicalResult Optimizer::checkOptions(ModuleOp module) {
  // torch.optim's own checks.
  if (optimizer != "sgd" && !isAdam())
    return module.emitError("unknown optimizer '")
           << optimizer << "': expected sgd, adam or adamw";
  decay = weightDecay < 0 ? (optimizer == "adamw" ? 1e-2 : 0.0)
                          : double(weightDecay);
  if (optimizer == "sgd" && amsgrad)
    return module.emitError("amsgrad applies to adam and adamw, not sgd");
  if (isAdam() && (momentum != 0.0 || nesterov || dampening != 0.0))
    return module.emitError("momentum, nesterov and dampening apply to sgd, "
                            "not ")
           << optimizer;
  if (!(lr >= 0.0))
    return module.emitError("invalid learning rate: ") << lr;
  if (!(momentum >= 0.0))
    return module.emitError("invalid momentum value: ") << momentum;
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    return module.emitError(
        "Nesterov momentum requires a momentum and zero dampening");
  if (!(eps >= 0.0))
    return module.emitError("invalid epsilon value: ") << eps;
  if (!(beta1 >= 0.0 && beta1 < 1.0))
    return module.emitError("invalid beta1 (beta parameter at index 0): ")
           << beta1;
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    return module.emitError("invalid beta2 (beta parameter at index 1): ")
           << beta2;
  return success();
}

FlatSymbolRefAttr Optimizer::declareState(StringRef name,
                                          RankedTensorType type,
                                          FlatSymbolRefAttr param) {
  OptimStateOp::create(*symbols, symbols->getUnknownLoc(), name, type, param);
  return FlatSymbolRefAttr::get(symbols->getContext(), name);
}

void Optimizer::updateParam(OpBuilder &b, GradOp grad, Value updated) {
  Location loc = grad.getLoc();
  auto flat = symbolTable->lookup<FlatParamOp>(grad.getParam());
  if (!flat || !flat.getReplicated()) {
    UpdateOp::create(b, loc, grad.getParamAttr(), updated);
    return;
  }
  MLIRContext *ctx = b.getContext();
  auto fullType = flat.getFullType();
  auto start = AllGatherStartOp::create(
      b, loc, FutureType::get(ctx, fullType), updated, grad.getParamAttr(),
      CommGroupAttr::get(ctx, CommGroup::shard));
  Value whole = WaitOp::create(b, loc, fullType, start.getResult());
  UpdateOp::create(b, loc, grad.getParamAttr(), whole);
}

void Optimizer::sgd(aten::ATenBuilder &b, GradOp grad, Value param) {
  auto type = cast<RankedTensorType>(param.getType());
  Location loc = grad.getLoc();
  OpBuilder &ob = b.builder();
  // d_p = (maximize ? -grad : grad) (+ weight_decay * param)
  Value dp = grad.getValue();
  if (maximize)
    dp = b.neg(dp);
  if (decay != 0.0)
    dp = b.add(dp, param, decay);
  if (momentum != 0.0) {
    auto name = declareState((grad.getParam() + ":momentum_buffer").str(), type,
                             grad.getParamAttr());
    // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
    Value buf = b.callInPlace("aten::mul_.Scalar",
                              {read(ob, loc, name, type), b.f64(momentum)});
    if (dampening == 0.0) {
      buf = b.callInPlace("aten::add_.Tensor", {buf, dp, b.i64(1)});
    } else {
      buf = b.callInPlace("aten::add_.Tensor",
                          {buf, dp, b.f64(1.0 - dampening)});
      // The first step's buffer is a copy of d_p, undampened.
      buf = b.call("aten::where.self", {firstStep, dp, buf}, type);
    }
    UpdateOp::create(ob, loc, name, buf);
    dp = nesterov ? b.add(dp, buf, momentum) : buf;
  }
  Value updated = b.add(param, dp, -lr);
  updateParam(ob, grad, updated);
}

Value Optimizer::stepCount(aten::ATenBuilder &b) {
  OpBuilder &ob = b.builder();
  Location loc = b.getLoc();
  auto f64 = RankedTensorType::get({}, ob.getF64Type());
  auto name = declareState("optim:step", f64, FlatSymbolRefAttr());
  Value step = b.addScalar(read(ob, loc, name, f64), 1.0);
  UpdateOp::create(ob, loc, name, step);
  return step;
}

void Optimizer::adamStep(aten::ATenBuilder &b) {
  // step += 1; bias corrections in f64, as Python computes them from the
  // step count.
  OpBuilder &ob = b.builder();
  auto f64 = RankedTensorType::get({}, ob.getF64Type());
  Value step = stepCount(b);
  auto biasCorrection = [&](double beta) {
    // 1 - beta ** step
    Value power = b.call("aten::pow.Scalar", {b.f64(beta), step}, f64);
    return b.call("aten::rsub.Scalar", {power, b.f64(1.0), b.i64(1)}, f64);
  };
  Value bias1 = biasCorrection(beta1), bias2 = biasCorrection(beta2);
  // -(lr / bias1), and sqrt(bias2)
  negStepSize = b.div(b.splat(f64, -lr), bias1);
  bias2Sqrt = b.unary("aten::sqrt", bias2);
}

void Optimizer::adam(aten::ATenBuilder &b, GradOp grad, Value param) {
  auto type = cast<RankedTensorType>(param.getType());
  Location loc = grad.getLoc();
  OpBuilder &ob = b.builder();
  Value g = grad.getValue();
  StringRef p = grad.getParam();
  auto avgName = declareState((p + ":exp_avg").str(), type, grad.getParamAttr());
  auto sqName =
      declareState((p + ":exp_avg_sq").str(), type, grad.getParamAttr());
  // The same ops as torch.optim, in place where they write a value of the
  // step's own (the runtime copies state it must not overwrite).
  // grad = -grad if maximize
  if (maximize)
    g = b.neg(g);
  bool decoupled = optimizer == "adamw";
  // Adam: grad = grad.add(param, alpha=weight_decay)
  if (!decoupled && decay != 0.0)
    g = b.add(g, param, decay);
  // AdamW: param.mul_(1 - lr * weight_decay)
  bool decays = decoupled && decay != 0.0;
  Value decayed = decays ? b.mulScalar(param, 1.0 - lr * decay) : param;
  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
  Value avg = b.callInPlace("aten::mul_.Scalar",
                            {read(ob, loc, avgName, type), b.f64(beta1)});
  avg = b.callInPlace("aten::add_.Tensor", {avg, g, b.f64(1.0 - beta1)});
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  Value sq = b.callInPlace("aten::mul_.Scalar",
                           {read(ob, loc, sqName, type), b.f64(beta2)});
  sq = b.callInPlace("aten::addcmul_", {sq, g, g, b.f64(1.0 - beta2)});
  // amsgrad: torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq),
  // which normalizes instead of exp_avg_sq.
  Value second = sq;
  if (amsgrad) {
    auto maxName =
        declareState((p + ":max_exp_avg_sq").str(), type, grad.getParamAttr());
    second = b.call("aten::maximum", {read(ob, loc, maxName, type), sq}, type);
    UpdateOp::create(ob, loc, maxName, second);
  }
  // denom = (exp_avg_sq.sqrt() / sqrt(bias2)).add_(eps)
  Value denom = b.callInPlace("aten::div_.Tensor",
                              {b.unary("aten::sqrt", second), bias2Sqrt});
  denom = b.callInPlace("aten::add_.Scalar", {denom, b.f64(eps), b.i64(1)});
  // param.addcdiv_(exp_avg, denom, value=-step_size): addcdiv computes
  // param + (value * exp_avg) / denom.
  Value update = b.callInPlace("aten::div_.Tensor",
                               {b.mul(avg, negStepSize), denom});
  Value updated = decays ? b.callInPlace("aten::add_.Tensor",
                                         {decayed, update, b.i64(1)})
                         : b.add(decayed, update);
  updateParam(ob, grad, updated);
  UpdateOp::create(ob, loc, avgName, avg);
  UpdateOp::create(ob, loc, sqName, sq);
}

LogicalResult Optimizer::run(ModuleOp module) {
  if (failed(checkOptions(module)))
    return failure();
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    return module.emitError("no @train_step to add the optimizer to");
  SmallVector<GradOp> gradOps(func.getBody().getOps<GradOp>());
  if (gradOps.empty())
    return func.emitOpError("has no fsdp.grad: run fsdp-autodiff before "
                            "fsdp-optimizer");

  // State symbols go after the model's own, before the function.
  OpBuilder symbolBuilder(func);
  symbols = &symbolBuilder;
  SymbolTable table(module);
  symbolTable = &table;
  llvm::DenseMap<StringAttr, Value> current;
  for (auto get : func.getBody().getOps<GetOp>())
    current.try_emplace(get.getNameAttr().getAttr(), get.getResult());

  OpBuilder builder(gradOps.front());
  aten::ATenBuilder b(builder, gradOps.front().getLoc());
  if (isAdam()) {
    adamStep(b);
  } else if (momentum != 0.0 && dampening != 0.0) {
    Value step = stepCount(b);
    firstStep = b.call(
        "aten::eq.Scalar", {step, b.f64(1.0)},
        RankedTensorType::get({}, IntegerType::get(module.getContext(), 1)));
  }
  for (GradOp grad : gradOps) {
    builder.setInsertionPoint(grad);
    b.setLoc(grad.getLoc());
    Value param = current.lookup(grad.getParamAttr().getAttr());
    auto flat = table.lookup<FlatParamOp>(grad.getParam());
    if (!param)
      param = GetOp::create(builder, grad.getLoc(),
                            flat ? flat.getStateType()
                                 : grad.getValue().getType(),
                            grad.getParamAttr());
    // A replicated flat parameter: this rank updates its shard.
    if (flat && flat.getReplicated())
      param = LocalShardOp::create(
          builder, grad.getLoc(), flat.getShardType(), param,
          grad.getParamAttr(),
          CommGroupAttr::get(module.getContext(), CommGroup::shard));
    if (optimizer == "sgd")
      sgd(b, grad, param);
    else
      adam(b, grad, param);
    grad.erase();
  }
  return success();
}

} // namespace
