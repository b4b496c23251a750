//===- Optimizer.cpp - fsdp.grad becomes the optimizer's update ------------===//
//
// The update rules of torch.optim.SGD, Adam and AdamW in their single-tensor
// form, op for op, so that the arithmetic (and its rounding) is PyTorch's.
// Optimizer state is zero before the first step: for SGD's momentum buffer
// without dampening, `0 * momentum + grad` is exactly PyTorch's first-step
// copy of the gradient; with dampening the step count selects the copy.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/runtime/PlanSchema.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cfloat>
#include <cmath>

namespace fsdp {
#define GEN_PASS_DEF_OPTIMIZER
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

StringRef toRef(std::string_view name) { return {name.data(), name.size()}; }

/// The sum of `v` over `group`, started and waited at once.
static Value allReduceSum(OpBuilder &b, Location loc, Value v,
                          CommGroup group) {
  MLIRContext *ctx = b.getContext();
  auto start = AllReduceStartOp::create(
      b, loc, FutureType::get(ctx, cast<RankedTensorType>(v.getType())), v,
      CommGroupAttr::get(ctx, group), ReduceOpAttr::get(ctx, ReduceOp::sum));
  return WaitOp::create(b, loc, v.getType(), start.getResult());
}

struct Optimizer : fsdp::impl::OptimizerBase<Optimizer> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // What the step holds before: every other op is the optimizer's.
    existing.clear();
    module.walk([&](func::FuncOp func) {
      for (Block &block : func.getBody())
        for (Operation &op : block)
          existing.insert(&op);
    });
    if (failed(run(module)))
      return signalPassFailure();
    Builder b(module.getContext());
    module.walk([&](func::FuncOp func) {
      for (Block &block : func.getBody())
        for (Operation &op : block)
          if (!existing.contains(&op) && !isa<func::ReturnOp>(op))
            op.setAttr(kOptimizerOpAttr, b.getUnitAttr());
    });
  }

  /// The ops of the step before this pass (an erased one leaves the set:
  /// its address may be a new op's).
  llvm::DenseSet<Operation *> existing;

  LogicalResult run(ModuleOp module);
  LogicalResult checkOptions(ModuleOp module);

  /// Declares optimizer state `name` (zero at the start); `device`: on
  /// the device even under CPU offload (the gradient scaler's).
  FlatSymbolRefAttr declareState(StringRef name, RankedTensorType type,
                                 FlatSymbolRefAttr param, bool device = false);
  /// Writes optimizer state (a parameter, its state, a step count): the
  /// updates a gradient scaler skips.
  void write(OpBuilder &b, Location loc, FlatSymbolRefAttr name,
             Value value) {
    updates.push_back(UpdateOp::create(b, loc, name, value));
  }
  Value read(OpBuilder &b, Location loc, FlatSymbolRefAttr name,
             RankedTensorType type) {
    return GetOp::create(b, loc, type, name);
  }

  /// The parameter's new value: a replicated flat parameter's updated
  /// shards are gathered back into the whole that every rank holds.
  void updateParam(OpBuilder &b, GradOp grad, Value updated, Value old);
  /// The update of `grad`'s parameter from gradient `g` (the fsdp.grad's
  /// value, clipped where the gradients are).
  void sgd(aten::ATenBuilder &b, GradOp grad, Value g, Value param);
  void adam(aten::ATenBuilder &b, GradOp grad, Value g, Value param);
  /// clip_grad_norm_ over every gradient: the coefficient they are
  /// multiplied by, built before `last` (the last fsdp.grad); the total
  /// norm in `totalNorm`.
  Value clipCoefficient(aten::ATenBuilder &b, ModuleOp module,
                        ArrayRef<GradOp> grads, GradOp last);
  /// The step count (f64, `optim:step`), incremented once per step before
  /// the first update.
  Value stepCount(aten::ATenBuilder &b);
  /// The learning rate of this step (f64) under `lrSchedule`.
  Value scheduledLr(aten::ATenBuilder &b, Value step);
  /// Adam's per-step scalars, computed once before the first update.
  void adamStep(aten::ATenBuilder &b, Value step);
  bool isAdam() const { return kind != OptimizerKind::SGD; }
  // The optimizer and the schedule (none: a constant rate), from the
  // options.
  OptimizerKind kind = OptimizerKind::SGD;
  std::optional<LrSchedule> schedule;
  /// CPU offload: the parameter's optimizer state (and so its reduced
  /// gradient and its update) lives on the host.
  static bool stateOnHost(Operation *param) {
    return param &&
           (param->hasAttr(kHostAttr) || param->hasAttr(kHostOptimAttr));
  }

  // Dynamic loss scaling (grad-scaler), as ShardedGradScaler does it.
  /// Multiplies the backward's seed by the scale (`scale`, `invScale`).
  LogicalResult scaleSeed(func::FuncOp func);
  /// Checks `grad` for inf/NaN (counted in `foundHost`/`foundDevice`) and
  /// multiplies it by the scale's reciprocal, before the update reads it.
  void unscale(aten::ATenBuilder &b, GradOp grad);
  /// Whether any rank found an inf/NaN (`skip`, and `hostSkip`), built
  /// before `last`.
  void decideSkip(aten::ATenBuilder &b, ModuleOp module);
  /// Every optimizer update keeps the old value where the step skips.
  void gateUpdates(Operation *after);
  /// The next step's scale and growth tracker.
  void updateScale(aten::ATenBuilder &b);
  /// `v` (on the device) copied to the host once, right after it.
  Value onHost(Value v);
  Value scale, invScale, foundHost, foundDevice, skip, hostSkip;
  SmallVector<UpdateOp> updates;
  llvm::DenseMap<Value, Value> hostCopies;

  bool cuda = false;      // the module is compiled for a GPU (fsdp.device)
  bool offloaded = false; // CPU offload: some flat parameter is on the host
  // CPU offload of every unit's optimizer state: the step count (and what
  // is computed from it) lives on the host too.
  bool scalarsOnHost = false;
  /// `v` where an update on the host (or the device) reads it: itself, or
  /// a copy made once right after it.
  Value placed(Value v, bool host);
  llvm::DenseMap<Value, Value> deviceCopies;
  OpBuilder *symbols = nullptr; // where state symbols are declared
  SymbolTable *symbolTable = nullptr;
  double decay = 0.0;
  Value negStepSize, bias2Sqrt;
  // SGD with dampening: true on the first step (the buffer copies d_p).
  Value firstStep;
  // With a schedule: this step's learning rate and its negation (f64).
  Value lrValue, negLr;
  // With clipping: the gradients' total norm, and (CPU offload) the
  // coefficient's copy on the host.
  Value totalNorm, hostCoef;
};

LogicalResult Optimizer::checkOptions(ModuleOp module) {
  // torch.optim's own checks.
  std::optional<OptimizerKind> named = symbolizeOptimizerKind(optimizer);
  if (!named)
    return module.emitError("unknown optimizer '")
           << optimizer << "': expected sgd, adam or adamw";
  kind = *named;
  decay = weightDecay < 0 ? (kind == OptimizerKind::AdamW ? 1e-2 : 0.0)
                          : double(weightDecay);
  if (kind == OptimizerKind::SGD && amsgrad)
    return module.emitError("amsgrad applies to adam and adamw, not sgd");
  if (isAdam() && (momentum != 0.0 || nesterov || dampening != 0.0))
    return module.emitError("momentum, nesterov and dampening apply to sgd, "
                            "not ")
           << optimizer;
  if (!(lr >= 0.0))
    return module.emitError("invalid learning rate: ") << lr;
  if (!(momentum >= 0.0))
    return module.emitError("invalid momentum value: ") << momentum;
  if (!lrSchedule.empty()) {
    schedule = symbolizeLrSchedule(lrSchedule);
    if (!schedule)
      return module.emitError("unknown learning-rate schedule '")
             << lrSchedule << "': expected constant, linear, cosine or external";
  }
  if (warmupSteps < 0 || totalSteps < 0)
    return module.emitError("warmup-steps and total-steps must not be "
                            "negative");
  if ((schedule == LrSchedule::Linear || schedule == LrSchedule::Cosine) &&
      totalSteps < 1)
    return module.emitError("the ")
           << lrSchedule
           << " learning-rate schedule needs total-steps: the steps over "
              "which the learning rate decays to 0";
  if ((!schedule || schedule == LrSchedule::Constant ||
       schedule == LrSchedule::External) &&
      totalSteps != 0)
    return module.emitError("total-steps applies to the linear and cosine "
                            "learning-rate schedules");
  if ((!schedule || schedule == LrSchedule::External) && warmupSteps != 0)
    return module.emitError("warmup-steps needs a constant, linear or cosine "
                            "learning-rate schedule (with external, the "
                            "runner sets each step's rate)");
  if (maxGradNorm < 0.0)
    return module.emitError("invalid max-grad-norm: ")
           << maxGradNorm << " (0 does not clip)";
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
  // GradScaler's own checks.
  if (gradScaler) {
    if (!(initScale > 0.0) || initScale > double(FLT_MAX))
      return module.emitError("invalid init-scale: ")
             << initScale << " (the gradient scaler's first scale: positive "
                             "and finite in f32)";
    if (!(growthFactor > 1.0))
      return module.emitError("invalid growth-factor: ")
             << growthFactor << " (the growth factor must be > 1.0)";
    if (!(backoffFactor > 0.0 && backoffFactor < 1.0))
      return module.emitError("invalid backoff-factor: ")
             << backoffFactor << " (the backoff factor must be in (0, 1))";
    if (growthInterval < 1)
      return module.emitError("invalid growth-interval: ")
             << growthInterval.getValue()
             << " (the good steps before the scale grows: at least 1)";
  }
  return success();
}

FlatSymbolRefAttr Optimizer::declareState(StringRef name,
                                          RankedTensorType type,
                                          FlatSymbolRefAttr param,
                                          bool device) {
  auto state = OptimStateOp::create(*symbols, symbols->getUnknownLoc(), name,
                                    type, param);
  // CPU offload: a host parameter's state lives on the host too, and so
  // does the step count when every parameter's does.
  bool host = param ? stateOnHost(symbolTable->lookup(param.getValue()))
                    : scalarsOnHost && !device;
  if (host)
    state->setAttr(kHostAttr, symbols->getUnitAttr());
  return FlatSymbolRefAttr::get(symbols->getContext(), name);
}

void Optimizer::updateParam(OpBuilder &b, GradOp grad, Value updated,
                            Value old) {
  Location loc = grad.getLoc();
  auto flat = symbolTable->lookup<FlatParamOp>(grad.getParam());
  if (!flat || !flat.getReplicated()) {
    // Optimizer state offloaded alone: the host's update goes back to the
    // device's shard.
    if (flat && flat->hasAttr(kHostOptimAttr))
      updated = ToDeviceOp::create(b, loc, updated);
    write(b, loc, grad.getParamAttr(), updated);
    return;
  }
  MLIRContext *ctx = b.getContext();
  auto fullType = flat.getFullType();
  // A gradient scaler's skip keeps the old shard, which the gather then
  // hands back whole.
  if (skip)
    updated = aten::ATenBuilder(b, loc).call(
        "aten::where.self", {skip, old, updated},
        updated.getType());
  auto start = AllGatherStartOp::create(
      b, loc, FutureType::get(ctx, fullType), updated, grad.getParamAttr(),
      CommGroupAttr::get(ctx, CommGroup::shard));
  Value whole = WaitOp::create(b, loc, fullType, start.getResult());
  UpdateOp::create(b, loc, grad.getParamAttr(), whole);
}

void Optimizer::sgd(aten::ATenBuilder &b, GradOp grad, Value g,
                    Value param) {
  auto type = cast<RankedTensorType>(param.getType());
  Location loc = grad.getLoc();
  OpBuilder &ob = b.builder();
  // d_p = (maximize ? -grad : grad) (+ weight_decay * param)
  Value dp = g;
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
    write(ob, loc, name, buf);
    dp = nesterov ? b.add(dp, buf, momentum) : buf;
  }
  // param.add_(d_p, alpha=-lr)
  Value updated =
      negLr ? b.add(param, b.mul(dp, negLr)) : b.add(param, dp, -lr);
  updateParam(ob, grad, updated, param);
}

Value Optimizer::stepCount(aten::ATenBuilder &b) {
  OpBuilder &ob = b.builder();
  Location loc = b.getLoc();
  auto f64 = RankedTensorType::get({}, ob.getF64Type());
  auto name = declareState(toRef(plan::kStateStepCount), f64,
                           FlatSymbolRefAttr());
  Value step = b.addScalar(read(ob, loc, name, f64), 1.0);
  write(ob, loc, name, step);
  return step;
}

Value Optimizer::scheduledLr(aten::ATenBuilder &b, Value step) {
  // LambdaLR: step k (from 0) uses lr * lambda(k); Python's arithmetic in
  // f64, op for op.
  auto f64 = cast<RankedTensorType>(step.getType());
  auto i1 = RankedTensorType::get({}, b.builder().getI1Type());
  Value k = b.addScalar(step, -1.0);
  double warmup = double(warmupSteps), total = double(totalSteps);
  // float(k) / float(max(1, warmup))
  Value warming = b.divScalar(k, std::max(1.0, warmup));
  Value after;
  if (schedule == LrSchedule::Constant) {
    after = b.splat(f64, 1.0);
  } else {
    double span = std::max(1.0, total - warmup);
    if (schedule == LrSchedule::Linear) {
      // float(total - k) / float(max(1, total - warmup))
      Value left = b.call("aten::rsub.Scalar", {k, b.f64(total), b.i64(1)}, f64);
      after = b.divScalar(left, span);
    } else {
      // 0.5 * (1 + cos(pi * 0.5 * 2 * progress)), progress =
      // float(k - warmup) / float(max(1, total - warmup))
      Value progress = b.divScalar(b.addScalar(k, -warmup), span);
      Value angle = b.mulScalar(progress, M_PI * 0.5 * 2.0);
      Value cosine = b.addScalar(b.unary("aten::cos", angle), 1.0);
      after = b.mulScalar(cosine, 0.5);
    }
    // max(0.0, ...)
    after = b.call("aten::clamp_min", {after, b.f64(0.0)}, f64);
  }
  Value warm = b.call("aten::lt.Scalar", {k, b.f64(warmup)}, i1);
  Value factor = b.call("aten::where.self", {warm, warming, after}, f64);
  // base_lr * lambda(k)
  return b.call("aten::mul.Scalar", {factor, b.f64(lr)}, f64);
}

void Optimizer::adamStep(aten::ATenBuilder &b, Value step) {
  // Bias corrections in f64, as Python computes them from the step count.
  OpBuilder &ob = b.builder();
  auto f64 = RankedTensorType::get({}, ob.getF64Type());
  auto biasCorrection = [&](double beta) {
    // 1 - beta ** step
    Value power = b.call("aten::pow.Scalar", {b.f64(beta), step}, f64);
    return b.call("aten::rsub.Scalar", {power, b.f64(1.0), b.i64(1)}, f64);
  };
  Value bias1 = biasCorrection(beta1), bias2 = biasCorrection(beta2);
  // -(lr / bias1), and sqrt(bias2)
  negStepSize = b.div(negLr ? negLr : b.splat(f64, -lr), bias1);
  bias2Sqrt = b.unary("aten::sqrt", bias2);
}

void Optimizer::adam(aten::ATenBuilder &b, GradOp grad, Value g,
                     Value param) {
  auto type = cast<RankedTensorType>(param.getType());
  Location loc = grad.getLoc();
  OpBuilder &ob = b.builder();
  StringRef p = grad.getParam();
  auto avgName = declareState((p + ":exp_avg").str(), type, grad.getParamAttr());
  auto sqName =
      declareState((p + ":exp_avg_sq").str(), type, grad.getParamAttr());
  // The same ops as torch.optim, in place where they write a value of the
  // step's own (the runtime copies state it must not overwrite).
  // grad = -grad if maximize
  if (maximize)
    g = b.neg(g);
  bool decoupled = kind == OptimizerKind::AdamW;
  // Adam: grad = grad.add(param, alpha=weight_decay)
  if (!decoupled && decay != 0.0)
    g = b.add(g, param, decay);
  // AdamW: param.mul_(1 - lr * weight_decay)
  bool decays = decoupled && decay != 0.0;
  Value decayed = param;
  if (decays && lrValue)
    decayed = b.mul(param, b.call("aten::rsub.Scalar",
                                  {b.mulScalar(lrValue, decay), b.f64(1.0),
                                   b.i64(1)},
                                  lrValue.getType()));
  else if (decays)
    decayed = b.mulScalar(param, 1.0 - lr * decay);
  // exp_avg.lerp_(grad, 1 - beta1) (torch >= 2.0; mul_ and add_ before)
  Value avg = b.callInPlace("aten::lerp_.Scalar",
                            {read(ob, loc, avgName, type), g, b.f64(1.0 - beta1)});
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
    write(ob, loc, maxName, second);
  }
  // denom = (exp_avg_sq.sqrt() / sqrt(bias2)).add_(eps)
  Value denom = b.callInPlace("aten::div_.Tensor",
                              {b.unary("aten::sqrt", second), bias2Sqrt});
  denom = b.callInPlace("aten::add_.Scalar", {denom, b.f64(eps), b.i64(1)});
  // param.addcdiv_(exp_avg, denom, value=-step_size): ATen's CPU kernel
  // computes param + (value * exp_avg) / denom, CUDA's (addcdiv_, and the
  // foreach kernels eager Adam runs on a GPU) param + value * (exp_avg /
  // denom). A step for a GPU follows CUDA's, but where this parameter's
  // update runs on the host (CPU offload), as eager's does.
  bool cudaOrder =
      cuda && !stateOnHost(symbolTable->lookup(grad.getParam()));
  Value update =
      cudaOrder
          ? b.callInPlace("aten::mul_.Tensor", {b.div(avg, denom), negStepSize})
          : b.callInPlace("aten::div_.Tensor",
                          {b.mul(avg, negStepSize), denom});
  Value updated = decays ? b.callInPlace("aten::add_.Tensor",
                                         {decayed, update, b.i64(1)})
                         : b.add(decayed, update);
  updateParam(ob, grad, updated, param);
  write(ob, loc, avgName, avg);
  write(ob, loc, sqName, sq);
}

LogicalResult Optimizer::run(ModuleOp module) {
  if (failed(checkOptions(module)))
    return failure();
  // torch.optim's param group, as a checkpoint's optimizer state dict has
  // it.
  {
    Builder attrs(module.getContext());
    SmallVector<NamedAttribute> group{
        attrs.getNamedAttr("name", attrs.getStringAttr(optimizer)),
        attrs.getNamedAttr("lr", attrs.getF64FloatAttr(lr)),
        attrs.getNamedAttr("weight_decay", attrs.getF64FloatAttr(decay)),
        attrs.getNamedAttr("maximize", attrs.getBoolAttr(maximize))};
    if (isAdam()) {
      group.push_back(attrs.getNamedAttr(
          "betas", attrs.getDenseF64ArrayAttr({double(beta1), double(beta2)})));
      group.push_back(attrs.getNamedAttr("eps", attrs.getF64FloatAttr(eps)));
      group.push_back(
          attrs.getNamedAttr("amsgrad", attrs.getBoolAttr(amsgrad)));
    } else {
      group.push_back(
          attrs.getNamedAttr("momentum", attrs.getF64FloatAttr(momentum)));
      group.push_back(
          attrs.getNamedAttr("dampening", attrs.getF64FloatAttr(dampening)));
      group.push_back(
          attrs.getNamedAttr("nesterov", attrs.getBoolAttr(nesterov)));
    }
    module->setAttr(kOptimizerAttr, attrs.getDictionaryAttr(group));
    if (gradScaler)
      module->setAttr(
          kGradScalerAttr,
          attrs.getDictionaryAttr(
              {attrs.getNamedAttr("init_scale", attrs.getF64FloatAttr(initScale)),
               attrs.getNamedAttr("growth_factor",
                                  attrs.getF64FloatAttr(growthFactor)),
               attrs.getNamedAttr("backoff_factor",
                                  attrs.getF64FloatAttr(backoffFactor)),
               attrs.getNamedAttr("growth_interval",
                                  attrs.getI64IntegerAttr(growthInterval))}));
  }
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    return module.emitError("no @train_step to add the optimizer to");
  SmallVector<GradOp> gradOps(func.getBody().getOps<GradOp>());
  if (gradOps.empty())
    return func.emitOpError("has no fsdp.grad: run fsdp-autodiff before "
                            "fsdp-optimizer");

  if (auto device = module->getAttrOfType<StringAttr>(kDeviceAttr))
    cuda = device.getValue() == "cuda";
  offloaded = llvm::any_of(module.getOps<FlatParamOp>(), [](FlatParamOp f) {
    return stateOnHost(f);
  });
  scalarsOnHost =
      offloaded && llvm::all_of(module.getOps<FlatParamOp>(),
                                [](FlatParamOp f) { return stateOnHost(f); });
  // State symbols go after the model's own, before the function.
  OpBuilder symbolBuilder(func);
  symbols = &symbolBuilder;
  SymbolTable table(module);
  symbolTable = &table;
  // Mixed precision: a gradient computed (and reduced) in a 16-bit type is
  // cast to its parameter's own type first, as FSDP casts the reduced
  // shard back; the optimizer (and clipping) work in the parameter's type.
  for (GradOp grad : gradOps) {
    Type elem;
    if (auto flat = table.lookup<FlatParamOp>(grad.getParam()))
      elem = flat.getElementType();
    else if (auto param = table.lookup<ParamOp>(grad.getParam()))
      elem = cast<ShapedType>(param.getType()).getElementType();
    if (!elem || aten::ATenBuilder::typeOf(grad.getValue()).getElementType() == elem)
      continue;
    OpBuilder before(grad);
    grad.getValueMutable().assign(
        aten::ATenBuilder(before, grad.getLoc()).cast(grad.getValue(), elem));
  }
  // Reads of the state in its own type (mixed precision reads parameters
  // in their compute type as well).
  llvm::DenseMap<StringAttr, Value> current;
  for (auto get : func.getBody().getOps<GetOp>()) {
    Operation *symbol = table.lookup(get.getName());
    Type stored;
    if (auto flat = dyn_cast_or_null<FlatParamOp>(symbol))
      stored = flat.getStateType();
    else if (auto param = dyn_cast_or_null<ParamOp>(symbol))
      stored = param.getType();
    if (!stored || stored == get.getType())
      current.try_emplace(get.getNameAttr().getAttr(), get.getResult());
  }

  OpBuilder builder(gradOps.front());
  aten::ATenBuilder b(builder, gradOps.front().getLoc());
  // Dynamic loss scaling: every gradient is computed scaled, checked and
  // unscaled where it is complete.
  if (gradScaler) {
    if (failed(scaleSeed(func)))
      return failure();
    for (GradOp grad : gradOps) {
      builder.setInsertionPoint(grad);
      b.setLoc(grad.getLoc());
      unscale(b, grad);
    }
    builder.setInsertionPoint(gradOps.front());
    b.setLoc(gradOps.front().getLoc());
  }
  bool dampened =
      kind == OptimizerKind::SGD && momentum != 0.0 && dampening != 0.0;
  Value step;
  bool external = schedule == LrSchedule::External;
  if (isAdam() || dampened || (schedule && !external))
    step = stepCount(b);
  if (external) {
    // The rate the runner set (optim:lr, starting at lr).
    auto f64 = RankedTensorType::get({}, builder.getF64Type());
    auto name = declareState(toRef(plan::kStateLr), f64, FlatSymbolRefAttr());
    lrValue = read(builder, b.getLoc(), name, f64);
    negLr = b.neg(lrValue);
  } else if (schedule) {
    // The schedule counts the updates taken: a step a gradient scaler skips
    // does not advance it, as Accelerate's scheduler skips its step then.
    lrValue = scheduledLr(b, step);
    negLr = b.neg(lrValue);
  }
  if (isAdam())
    adamStep(b, step);
  if (dampened)
    firstStep = b.call(
        "aten::eq.Scalar", {step, b.f64(1.0)},
        RankedTensorType::get({}, IntegerType::get(module.getContext(), 1)));
  // Clipping: every update waits for the total norm, after the last
  // gradient.
  if (gradScaler) {
    builder.setInsertionPoint(gradOps.back());
    b.setLoc(gradOps.back().getLoc());
    decideSkip(b, module);
  }
  Value coef;
  if (maxGradNorm > 0.0)
    coef = clipCoefficient(b, module, gradOps, gradOps.back());
  for (GradOp grad : gradOps) {
    builder.setInsertionPoint(coef || gradScaler ? gradOps.back() : grad);
    b.setLoc(grad.getLoc());
    Value param = current.lookup(grad.getParamAttr().getAttr());
    auto flat = table.lookup<FlatParamOp>(grad.getParam());
    if (!param)
      param = GetOp::create(builder, grad.getLoc(),
                            flat ? flat.getStateType()
                                 : table.lookup<ParamOp>(grad.getParam())
                                       .getType(),
                            grad.getParamAttr());
    // Optimizer state offloaded alone: the update reads a host copy of the
    // device's shard.
    if (flat && flat->hasAttr(kHostOptimAttr))
      param = ToHostOp::create(builder, grad.getLoc(), param);
    // A replicated flat parameter: this rank updates its shard.
    if (flat && flat.getReplicated())
      param = LocalShardOp::create(
          builder, grad.getLoc(), flat.getShardType(), param,
          grad.getParamAttr(),
          CommGroupAttr::get(module.getContext(), CommGroup::shard));
    // g.mul_(clip_coef_clamped)
    Value g = grad.getValue();
    if (coef)
      g = b.mul(g, stateOnHost(flat) ? hostCoef : coef);
    // The step's scalars, copied where this update runs (CPU offload of
    // some units).
    bool host = stateOnHost(flat);
    SmallVector<Value *> scalars = {&negStepSize, &bias2Sqrt, &firstStep,
                                    &lrValue, &negLr};
    SmallVector<Value> kept;
    for (Value *v : scalars) {
      kept.push_back(*v);
      if (*v)
        *v = placed(*v, host);
    }
    if (kind == OptimizerKind::SGD)
      sgd(b, grad, g, param);
    else
      adam(b, grad, g, param);
    for (auto [v, old] : llvm::zip(scalars, kept))
      *v = old;
  }
  Value skipped;
  if (gradScaler) {
    builder.setInsertionPoint(gradOps.back());
    b.setLoc(gradOps.back().getLoc());
    updateScale(b);
    gateUpdates(gradOps.back());
    skipped = b.cast(skip, builder.getF32Type());
  }
  for (GradOp grad : gradOps) {
    existing.erase(grad);
    grad.erase();
  }
  // The step's learning rate, gradient norm, loss scale and skip are
  // outputs the runtime reports as `lr`, `grad_norm`, `scale`, `skipped`.
  for (auto [value, name] : {std::pair(lrValue, plan::kMetricLr),
                             std::pair(totalNorm, plan::kMetricGradNorm),
                             std::pair(scale, plan::kMetricScale),
                             std::pair(skipped, plan::kMetricSkipped)}) {
    if (!value)
      continue;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    unsigned index = ret.getNumOperands();
    ret->insertOperands(index, value);
    NamedAttribute metric(
        StringAttr::get(module.getContext(), kMetricAttr),
        StringAttr::get(module.getContext(), StringRef(name.data(), name.size())));
    if (failed(func.insertResult(
            index, value.getType(),
            DictionaryAttr::get(module.getContext(), {metric}))))
      return func.emitOpError("cannot return the metric ")
             << StringRef(name.data(), name.size());
  }
  return success();
}

Value Optimizer::clipCoefficient(aten::ATenBuilder &b, ModuleOp module,
                                 ArrayRef<GradOp> grads, GradOp last) {
  OpBuilder &ob = b.builder();
  auto f32 = RankedTensorType::get({}, ob.getF32Type());
  // torch.linalg.vector_norm(g, 2) of each gradient where it is complete,
  // in f32: a rank's shards of the flat parameters apart from whole
  // gradients (parameters outside every unit, the same on every rank).
  auto norm = [&](Value v) {
    auto type = RankedTensorType::get(
        {}, cast<RankedTensorType>(v.getType()).getElementType());
    Value n = b.call("aten::linalg_vector_norm",
                     {v, b.f64(2.0), b.none(), b.boolean(false), b.none()},
                     type);
    return type == f32 ? n : b.cast(n, ob.getF32Type());
  };
  auto normOfNorms = [&](ArrayRef<Value> norms) {
    auto type = RankedTensorType::get({int64_t(norms.size())}, ob.getF32Type());
    return norm(b.call("aten::stack", {aten::ArgValue::tensors(norms), b.i64(0)},
                       type));
  };
  SmallVector<Value> shardedNorms, wholeNorms;
  for (GradOp grad : grads) {
    ob.setInsertionPoint(grad);
    b.setLoc(grad.getLoc());
    auto flat = symbolTable->lookup<FlatParamOp>(grad.getParam());
    Value n = norm(grad.getValue());
    // CPU offload: a host gradient's norm is copied to the device, where
    // the total is reduced.
    if (stateOnHost(flat))
      n = ToDeviceOp::create(ob, grad.getLoc(), n);
    (flat ? shardedNorms : wholeNorms).push_back(n);
  }
  ob.setInsertionPoint(last);
  b.setLoc(last.getLoc());
  if (shardedNorms.empty()) {
    // Unsharded: clip_grad_norm_'s own total.
    totalNorm = normOfNorms(wholeNorms);
  } else {
    // FSDP's: the shards' norms ** 2 summed over the shard group, plus the
    // whole gradients' (counted once), ** 0.5.
    Value sq = b.call("aten::pow.Tensor_Scalar",
                      {normOfNorms(shardedNorms), b.f64(2.0)}, f32);
    auto groupSize = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr);
    if (groupSize && groupSize.getInt() > 1)
      sq = allReduceSum(ob, last.getLoc(), sq, CommGroup::shard);
    if (!wholeNorms.empty())
      sq = b.add(sq, b.call("aten::pow.Tensor_Scalar",
                            {normOfNorms(wholeNorms), b.f64(2.0)}, f32));
    totalNorm = b.call("aten::pow.Tensor_Scalar", {sq, b.f64(0.5)}, f32);
  }
  // clip_coef = max_norm / (total_norm + 1e-6) (Python's float / tensor is
  // reciprocal * float), clamped to 1.
  Value recip = b.unary("aten::reciprocal", b.addScalar(totalNorm, 1e-6));
  Value coef = b.mulScalar(recip, maxGradNorm);
  coef = b.call("aten::clamp", {coef, b.none(), b.f64(1.0)}, f32);
  // The host's gradients are multiplied by a host copy.
  if (offloaded)
    hostCoef = ToHostOp::create(ob, last.getLoc(), coef);
  return coef;
}

/// `v` copied by a `CopyOp` (to the host or the device) once, right after
/// it; `copies` remembers the copy.
template <typename CopyOp>
static Value copiedOnce(Value v, llvm::DenseMap<Value, Value> &copies) {
  Value &copy = copies[v];
  if (!copy) {
    OpBuilder b(v.getContext());
    b.setInsertionPointAfterValue(v);
    copy = CopyOp::create(b, v.getLoc(), v);
  }
  return copy;
}

Value Optimizer::placed(Value v, bool host) {
  if (host == scalarsOnHost)
    return v;
  return host ? onHost(v) : copiedOnce<ToDeviceOp>(v, deviceCopies);
}

Value Optimizer::onHost(Value v) { return copiedOnce<ToHostOp>(v, hostCopies); }

LogicalResult Optimizer::scaleSeed(func::FuncOp func) {
  // One seed per micro-batch (fsdp-grad-accum copies it).
  SmallVector<Operation *> seeds;
  for (Operation &op : func.getBody().front())
    if (op.hasAttr(kBackwardStartAttr) && op.getNumResults() == 1)
      seeds.push_back(&op);
  if (seeds.empty())
    return func.emitOpError("has no backward seed (an op marked ")
           << kBackwardStartAttr
           << ") for the gradient scaler to scale: run fsdp-autodiff first";
  MLIRContext *ctx = func.getContext();
  auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
  auto f64 = RankedTensorType::get({}, Float64Type::get(ctx));
  auto i1 = RankedTensorType::get({}, IntegerType::get(ctx, 1));
  // The scale lives on the device: the backward's seed is there.
  auto name = declareState(toRef(plan::kStateScale), f32, FlatSymbolRefAttr(),
                           /*device=*/true);
  OpBuilder ob(ctx);
  ob.setInsertionPointAfter(seeds.front());
  aten::ATenBuilder b(ob, seeds.front()->getLoc());
  // The state starts at zero, which stands for init-scale.
  Value stored = read(ob, b.getLoc(), name, f32);
  Value unset = b.call("aten::eq.Scalar", {stored, b.f64(0.0)}, i1);
  scale = b.call("aten::where.self", {unset, b.splat(f32, initScale), stored},
                 f32);
  // GradScaler: inv_scale = scale.double().reciprocal().float().
  invScale = b.cast(b.call("aten::reciprocal", {b.cast(scale, f64.getElementType())},
                           f64),
                    f32.getElementType());
  // scaler.scale(loss).backward(): the seed times the scale.
  for (Operation *seed : seeds) {
    Value seedValue = seed->getResult(0);
    if (seed != seeds.front())
      ob.setInsertionPointAfter(seed);
    b.setLoc(seed->getLoc());
    Type elem = aten::ATenBuilder::typeOf(seedValue).getElementType();
    Value factor = elem == f32.getElementType() ? scale : b.cast(scale, elem);
    Value scaled = b.mul(seedValue, factor);
    seedValue.replaceAllUsesExcept(scaled, scaled.getDefiningOp());
    // The scaled seed starts the backward (scaler.scale(loss).backward()):
    // the backward's, not the optimizer's.
    existing.insert(scaled.getDefiningOp());
    if (factor != scale)
      existing.insert(factor.getDefiningOp());
  }
  return success();
}

void Optimizer::unscale(aten::ATenBuilder &b, GradOp grad) {
  bool host = stateOnHost(symbolTable->lookup(grad.getParam()));
  Value g = grad.getValue();
  MLIRContext *ctx = g.getContext();
  auto i1 = RankedTensorType::get({}, IntegerType::get(ctx, 1));
  auto type = aten::ATenBuilder::typeOf(g);
  // found_inf: some element is inf or NaN (checked before the multiply, as
  // _amp_foreach_non_finite_check_and_unscale_ does).
  Value finite = b.call("aten::isfinite", {g},
                        RankedTensorType::get(type.getShape(),
                                              IntegerType::get(ctx, 1)));
  Value bad = b.call("aten::logical_not", {b.call("aten::all", {finite}, i1)},
                     i1);
  Value count = b.cast(bad, Float32Type::get(ctx));
  Value &found = host ? foundHost : foundDevice;
  found = found ? b.add(found, count) : count;
  // grad *= inv_scale
  grad.getValueMutable().assign(b.mul(g, host ? onHost(invScale) : invScale));
}

void Optimizer::decideSkip(aten::ATenBuilder &b, ModuleOp module) {
  OpBuilder &ob = b.builder();
  MLIRContext *ctx = module.getContext();
  auto i1 = RankedTensorType::get({}, IntegerType::get(ctx, 1));
  // The host's count joins the device's, where the all-reduce runs.
  Value found = foundDevice;
  if (foundHost) {
    Value copied = ToDeviceOp::create(ob, b.getLoc(), foundHost);
    found = found ? b.add(found, copied) : copied;
  }
  // ShardedGradScaler: found_inf summed over every rank, so that all skip
  // together.
  auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr);
  if (world && world.getInt() > 1)
    found = allReduceSum(ob, b.getLoc(), found, CommGroup::world);
  skip = b.call("aten::ge.Scalar", {found, b.f64(1.0)}, i1);
  if (offloaded)
    hostSkip = ToHostOp::create(ob, b.getLoc(), skip);
}

void Optimizer::updateScale(aten::ATenBuilder &b) {
  OpBuilder &ob = b.builder();
  Location loc = b.getLoc();
  MLIRContext *ctx = ob.getContext();
  auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
  auto i32 = RankedTensorType::get({}, IntegerType::get(ctx, 32));
  auto i1 = RankedTensorType::get({}, IntegerType::get(ctx, 1));
  auto trackerName = declareState(toRef(plan::kStateGrowthTracker), i32,
                                  FlatSymbolRefAttr(), /*device=*/true);
  auto scaleName = FlatSymbolRefAttr::get(ctx, toRef(plan::kStateScale));
  // _amp_update_scale_: after an inf/NaN, scale * backoff and the tracker
  // reset; else the tracker counts the good step, and at growth_interval
  // the scale grows (where the product is finite) and the tracker resets.
  Value tracker = read(ob, loc, trackerName, i32);
  Value backedOff = b.mulScalar(scale, backoffFactor);
  Value good = b.call("aten::add.Scalar", {tracker, b.i64(1), b.i64(1)}, i32);
  Value grows = b.call("aten::eq.Scalar", {good, b.i64(growthInterval)}, i1);
  Value grown = b.mulScalar(scale, growthFactor);
  Value finite = b.call("aten::isfinite", {grown}, i1);
  grown = b.call("aten::where.self", {finite, grown, scale}, f32);
  Value kept = b.call("aten::where.self", {grows, grown, scale}, f32);
  Value zero = b.splat(i32, 0.0);
  Value counted = b.call("aten::where.self", {grows, zero, good}, i32);
  UpdateOp::create(ob, loc, scaleName,
                   b.call("aten::where.self", {skip, backedOff, kept}, f32));
  UpdateOp::create(ob, loc, trackerName,
                   b.call("aten::where.self", {skip, zero, counted}, i32));
}

void Optimizer::gateUpdates(Operation *before) {
  // The updates built before the decision (the step count) move after it;
  // each keeps the state's old value where the step skips.
  Operation *decided = skip.getDefiningOp();
  if (hostSkip)
    decided = hostSkip.getDefiningOp();
  SymbolTableCollection symbols;
  for (UpdateOp u : updates) {
    if (u->isBeforeInBlock(decided))
      u->moveBefore(before);
    OpBuilder ob(u);
    aten::ATenBuilder b(ob, u.getLoc());
    Value value = u.getValue();
    Value old = GetOp::create(ob, u.getLoc(), value.getType(), u.getNameAttr());
    bool host = isHostState(u, u.getNameAttr(), &symbols);
    u.getValueMutable().assign(b.call("aten::where.self",
                                      {host ? hostSkip : skip, old, value},
                                      value.getType()));
  }
}

} // namespace
