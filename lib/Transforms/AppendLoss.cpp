//===- AppendLoss.cpp - @forward becomes @train_step returning the loss ----===//

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Import/InputSpec.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace fsdp {
#define GEN_PASS_DEF_APPENDLOSS
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

struct AppendLoss : fsdp::impl::AppendLossBase<AppendLoss> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module);
  /// Appends the targets and the loss `kind` to `f` (a forward), whose only
  /// result the loss becomes, and names it `name`.
  LogicalResult appendLoss(func::FuncOp f, LossKind kind,
                           ArrayRef<InputSpec> specs, StringRef name);
  /// The function the evaluation step is made from: @eval_forward (the
  /// model in evaluation mode), else a copy of `forward` where it computes
  /// the same in both modes; null (and the module says why) where neither.
  FailureOr<func::FuncOp> evaluationForward(ModuleOp module,
                                            func::FuncOp forward);
  /// The loss of `out` against `target`, built before `ret`.
  FailureOr<Value> crossEntropy(aten::ATenBuilder &b, func::ReturnOp ret,
                                Value out, Value target,
                                const InputSpec &spec);
};

LogicalResult AppendLoss::run(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError("no @forward to build a training step from");
  if (module.lookupSymbol("train_step"))
    return module.emitError("the module already has a @train_step");
  std::optional<LossKind> kind = symbolizeLossKind(loss);
  if (!kind)
    return module.emitError("unknown loss '")
           << loss << "': expected cross_entropy, mse or none";

  // Targets: the option's, else those the model file stored.
  std::vector<std::string> texts(targets.begin(), targets.end());
  if (texts.empty())
    if (auto stored = module->getAttrOfType<ArrayAttr>(kTargetsAttr))
      for (Attribute a : stored)
        if (auto s = dyn_cast<StringAttr>(a))
          texts.push_back(s.str());
  SmallVector<InputSpec> specs;
  for (const std::string &text : texts) {
    InputSpec spec;
    std::string error;
    if (!parseInputSpec(text, spec, error))
      return module.emitError("target: ") << error;
    specs.push_back(spec);
  }
  if (kind == LossKind::None && !specs.empty())
    return module.emitError("loss none takes no target: a model that "
                            "returns its own loss receives its targets as "
                            "inputs (target '")
           << specs[0].name << "')";
  if (kind != LossKind::None && specs.size() != 1)
    return module.emitError("loss ")
           << loss << " needs exactly one target NAME:DIMSxDTYPE (e.g. "
           << (kind == LossKind::MSE ? "y:8x10xf32" : "y:8xi64") << "), found "
           << specs.size();

  for (const InputSpec &spec : specs)
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
          name && name.getValue() == spec.name)
        return module.emitError("target '")
               << spec.name << "' has the name of an input of the model";

  FailureOr<func::FuncOp> eval = evaluationForward(module, forward);
  if (failed(eval) ||
      failed(appendLoss(forward, *kind, specs, "train_step")))
    return failure();
  if (!*eval)
    return success();
  if (failed(appendLoss(*eval, *kind, specs, kEvalStepName)))
    return failure();
  // Eager evaluation runs under torch.no_grad(): the parameters still
  // require grad, nothing computed from them does. Ops that read the flag
  // (matmul) see it on the parameters they read directly.
  Builder builder(module.getContext());
  llvm::DenseSet<StringAttr> params;
  for (ParamOp p : module.getOps<ParamOp>())
    params.insert(p.getSymNameAttr());
  for (auto call : eval->getBody().getOps<aten::CallOp>()) {
    if (!aten::hasFact(call.getOverload(), aten::OpFact::ReadsRequiresGrad))
      continue;
    SmallVector<int64_t> operands;
    for (auto [index, operand] : llvm::enumerate(call.getOperands()))
      if (auto get = operand.getDefiningOp<GetOp>();
          get && params.contains(get.getNameAttr().getAttr()) &&
          isa<FloatType>(
              cast<ShapedType>(get.getType()).getElementType()))
        operands.push_back(index);
    if (!operands.empty())
      call->setAttr(aten::kRequiresGradAttr,
                    builder.getDenseI64ArrayAttr(operands));
  }
  return success();
}

/// Where `forward` computes differently in training than in evaluation:
/// a buffer it updates (BatchNorm's running statistics) or a random draw
/// (dropout with p > 0), described; "" where nowhere.
static std::string trainingOnly(func::FuncOp forward) {
  for (Operation &op : forward.getBody().front()) {
    if (auto update = dyn_cast<UpdateOp>(op))
      return "it updates buffer '" + update.getName().str() +
             "' (BatchNorm's running statistics, in training mode)";
    auto call = dyn_cast<aten::CallOp>(op);
    if (!call || !aten::hasFact(call.getOverload(), aten::OpFact::Random))
      continue;
    // Dropout with p = 0, or not training, draws nothing that counts.
    ArrayAttr args = call.getArgs();
    if (call.getOverload().contains("dropout") && args.size() >= 2) {
      auto p = dyn_cast<FloatAttr>(args[1]);
      auto train = args.size() >= 3 ? dyn_cast<BoolAttr>(args[2]) : BoolAttr();
      if ((p && p.getValueAsDouble() == 0.0) || (train && !train.getValue()))
        continue;
    }
    std::string module = describeModule(call);
    return "it draws random numbers (" + call.getOverload().str() +
           (module.empty() ? std::string() : " in " + module) +
           "), as dropout does in training mode";
  }
  return "";
}

FailureOr<func::FuncOp> AppendLoss::evaluationForward(ModuleOp module,
                                                      func::FuncOp forward) {
  if (module.lookupSymbol(kEvalStepName))
    return module.emitError("the module already has a @") << kEvalStepName;
  if (auto eval = module.lookupSymbol<func::FuncOp>(kEvalForwardName)) {
    if (eval.getFunctionType().getInputs() !=
        forward.getFunctionType().getInputs())
      return eval.emitOpError("takes ")
             << eval.getFunctionType().getInputs()
             << " but @forward takes " << forward.getFunctionType().getInputs()
             << ": the model in evaluation mode must take the training "
                "model's inputs";
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (eval.getArgAttr(i, kNameAttr) != forward.getArgAttr(i, kNameAttr))
        return eval.emitOpError("names its input #")
               << i << " " << eval.getArgAttr(i, kNameAttr)
               << " but @forward names it " << forward.getArgAttr(i, kNameAttr);
    if (eval.getBody().getOps<UpdateOp>().begin() !=
        eval.getBody().getOps<UpdateOp>().end())
      return (*eval.getBody().getOps<UpdateOp>().begin())
                 .emitOpError("updates state in the model in evaluation "
                              "mode: export it after model.eval()");
    return eval;
  }
  std::string why = trainingOnly(forward);
  if (!why.empty()) {
    module->setAttr(kNoEvalStepAttr,
                    StringAttr::get(module.getContext(),
                                    "the model's forward differs in "
                                    "evaluation mode: " + why));
    return func::FuncOp();
  }
  OpBuilder builder(forward);
  builder.setInsertionPointAfter(forward);
  auto eval = cast<func::FuncOp>(builder.clone(*forward));
  eval.setSymName(kEvalForwardName);
  return eval;
}

LogicalResult AppendLoss::appendLoss(func::FuncOp forward, LossKind kind,
                                     ArrayRef<InputSpec> specs,
                                     StringRef name) {
  Block &body = forward.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() == 0)
    return ret.emitOpError("returns nothing to take a loss of");
  Value out = ret.getOperand(0);
  auto outType = cast<RankedTensorType>(out.getType());
  OpBuilder builder(ret);
  Location loc = NameLoc::get(builder.getStringAttr("loss"), ret.getLoc());
  aten::ATenBuilder b(builder, loc);

  Value lossValue;
  SmallVector<Type> targetTypes;
  if (kind == LossKind::None) {
    if (outType.getRank() != 0 || !isa<FloatType>(outType.getElementType()))
      return ret.emitOpError("must return a scalar floating-point loss first "
                             "for loss none, but its first output is ")
             << outType;
    lossValue = out;
  } else {
    const InputSpec &spec = specs[0];
    Type elem = spec.elementType(&getContext());
    auto targetType = RankedTensorType::get(spec.shape, elem);
    targetTypes.push_back(targetType);
    Value target = body.addArgument(targetType, forward.getLoc());
    if (!isa<FloatType>(outType.getElementType()))
      return ret.emitOpError("returns ")
             << outType << " first, which is not floating point: there is "
             << "no loss to take of it";
    // Mixed precision: a model computing in bf16 returns bf16; the loss is
    // taken of its output in fp32, as Accelerate's convert_outputs_to_fp32
    // hands it to the user's loss (PyTorch 1.13's CPU mse has no bf16).
    if (outType.getElementType().isBF16() || outType.getElementType().isF16()) {
      outType = outType.clone(Float32Type::get(&getContext()));
      out = b.cast(out, outType.getElementType());
    }
    if (kind == LossKind::MSE) {
      if (targetType != outType)
        return ret.emitOpError("returns ")
               << outType << " first, but mse needs a target of the same "
               << "type, found '" << spec.str() << "'";
      lossValue = b.call("aten::mse_loss", {out, target, b.i64(1)},
                         RankedTensorType::get({}, outType.getElementType()));
    } else {
      FailureOr<Value> l = crossEntropy(b, ret, out, target, spec);
      if (failed(l))
        return failure();
      lossValue = *l;
    }
  }

  func::ReturnOp::create(builder, ret.getLoc(), lossValue);
  ret.erase();
  // The function type does not list the block arguments just added.
  SmallVector<Type> inputs(forward.getArgumentTypes());
  unsigned firstTarget = inputs.size();
  inputs.append(targetTypes);
  forward.setType(builder.getFunctionType(inputs, {lossValue.getType()}));
  for (auto [k, spec] : llvm::enumerate(specs))
    forward.setArgAttr(firstTarget + k, kNameAttr,
                       builder.getStringAttr(spec.name));
  forward.setSymName(name);
  return success();
}

FailureOr<Value> AppendLoss::crossEntropy(aten::ATenBuilder &b,
                                          func::ReturnOp ret, Value out,
                                          Value target,
                                          const InputSpec &spec) {
  auto outType = cast<RankedTensorType>(out.getType());
  auto targetType = cast<RankedTensorType>(target.getType());
  ArrayRef<int64_t> o = outType.getShape(), t = targetType.getShape();
  if (outType.getRank() == 0)
    return ret.emitOpError("returns a scalar first: cross_entropy needs "
                           "class scores");
  if (!targetType.getElementType().isInteger(64))
    return ret.emitOpError("needs class indices of dtype i64 as the "
                           "cross_entropy target, found '")
           << spec.str() << "'";
  // Class scores last ([B, T, V] against [B, T]), or in dimension 1 as
  // F.cross_entropy has them ([N, C, d...] against [N, d...]).
  bool classLast = t == o.drop_back();
  SmallVector<int64_t> withoutDim1;
  if (o.size() >= 2) {
    withoutDim1.push_back(o[0]);
    withoutDim1.append(o.begin() + 2, o.end());
  }
  bool classDim1 = o.size() >= 2 && t == ArrayRef<int64_t>(withoutDim1);
  if (!classLast && !classDim1) {
    std::string expected = typeString(
        RankedTensorType::get(o.drop_back(), targetType.getElementType()));
    return ret.emitOpError("returns ")
           << outType << " first, which target '" << spec.str()
           << "' does not fit: cross_entropy needs class indices shaped like "
           << "the output without its class dimension, " << expected;
  }
  Value logits = out;
  if (!classLast) {
    SmallVector<int64_t> perm{0};
    for (int64_t d = 2; d < outType.getRank(); ++d)
      perm.push_back(d);
    perm.push_back(1);
    logits = b.permute(out, perm);
  }
  auto logitsType = cast<RankedTensorType>(logits.getType());
  int64_t classes = logitsType.getShape().back();
  int64_t rows = ShapedType::getNumElements(logitsType.getShape().drop_back());
  Value scores = b.reshape(logits, {rows, classes});
  Value labels = b.reshape(target, {rows});
  Value logp = b.call("aten::log_softmax.int", {scores, b.i64(1), b.none()},
                      scores.getType());
  auto scalar = RankedTensorType::get({}, outType.getElementType());
  aten::CallOp nll = b.create(
      "aten::nll_loss_forward",
      {logp, labels, b.none(), b.i64(1), b.i64(-100)}, {scalar, scalar});
  return nll.getResult(0);
}

} // namespace
