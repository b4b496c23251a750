//===- AppendLoss.cpp - @forward becomes @train_step returning the loss ----===//

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
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

  Block &body = forward.getBody().front();
  for (const InputSpec &spec : specs)
    for (unsigned i = 0; i < forward.getNumArguments(); ++i)
      if (auto name = forward.getArgAttrOfType<StringAttr>(i, kNameAttr);
          name && name.getValue() == spec.name)
        return module.emitError("target '")
               << spec.name << "' has the name of an input of the model";

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
  forward.setSymName("train_step");
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
