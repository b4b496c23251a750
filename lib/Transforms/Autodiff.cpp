//===- Autodiff.cpp - reverse-mode differentiation of the loss -------------===//
//
// The step is one block of SSA ops, so reverse mode is a single backward walk:
// gradients of each op's results are known once every later use has been
// visited. Only "active" values are differentiated: floating-point values
// that depend on a parameter and that the loss depends on (the same values
// eager autograd would record).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/Gradients.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace fsdp {
#define GEN_PASS_DEF_AUTODIFF
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

/// The module an op runs in, for messages: `'rnn'
/// (torch.nn.modules.rnn.LSTM)`, or "" where its location names none. The
/// module is the innermost name in the op's location (the importer's scope),
/// its class from the module tree the importer recorded.
std::optional<std::string> fsdp::modulePathOf(Operation *op) {
  std::optional<std::string> path;
  op->getLoc()->walk([&](Location inner) {
    if (auto name = dyn_cast<NameLoc>(inner); name && !path)
      path = name.getName().str();
    return WalkResult::advance();
  });
  return path;
}

bool fsdp::isWithinModule(StringRef path, StringRef ancestor) {
  return ancestor.empty() || path == ancestor ||
         (path.starts_with(ancestor) && path.size() > ancestor.size() &&
          path[ancestor.size()] == '.');
}

SmallVector<std::pair<std::string, std::string>>
fsdp::moduleTree(ModuleOp module) {
  SmallVector<std::pair<std::string, std::string>> tree;
  if (auto modules = module->getAttrOfType<ArrayAttr>(kModulesAttr))
    for (Attribute entry : modules) {
      auto pair = dyn_cast<ArrayAttr>(entry);
      if (!pair || pair.size() != 2)
        continue;
      auto path = dyn_cast<StringAttr>(pair[0]);
      auto cls = dyn_cast<StringAttr>(pair[1]);
      if (path && cls)
        tree.push_back({path.str(), cls.str()});
    }
  return tree;
}

bool fsdp::moduleClassMatches(StringRef cls, StringRef name) {
  return cls == name || cls.rsplit('.').second == name;
}

std::string fsdp::describeModule(Operation *op) {
  std::optional<std::string> named = modulePathOf(op);
  if (!named)
    return "";
  std::string path = *named;
  std::string text = "'" + path + "'";
  auto top = op->getParentOfType<ModuleOp>();
  if (auto modules = top ? top->getAttrOfType<ArrayAttr>(kModulesAttr)
                         : ArrayAttr())
    for (Attribute entry : modules) {
      auto pair = dyn_cast<ArrayAttr>(entry);
      if (pair && pair.size() == 2) {
        auto p = dyn_cast<StringAttr>(pair[0]);
        auto c = dyn_cast<StringAttr>(pair[1]);
        if (p && c && p.getValue() == path)
          return text + " (" + c.getValue().str() + ")";
      }
    }
  return text;
}

std::string fsdp::describeCall(aten::CallOp call) {
  std::string module = describeModule(call);
  return call.getOverload().str() +
         (module.empty() ? "" : " in module " + module);
}

namespace {

/// A value gradients flow through: floating point, real or complex.
bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType, ComplexType>(type.getElementType());
}

bool isComplexTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<ComplexType>(type.getElementType());
}

/// Whether `call`'s gradient rule holds where complex values pass through
/// it. The rules are written for real values: a product's rule multiplies
/// by the other factor, where autograd's convention (the conjugate Wirtinger
/// derivative) multiplies by its conjugate. Only rules that move, copy or
/// add gradients without arithmetic on them hold for both; every other call
/// touching a complex value goes to libtorch's autograd.
bool ruleHoldsForComplex(aten::CallOp call) {
  auto touches = [](ValueRange values) {
    return llvm::any_of(values, isComplexTensor);
  };
  if (!touches(call.getOperands()) && !touches(call.getResults()))
    return true;
  static const llvm::StringSet<> layout = {
      "aten::view",         "aten::reshape",        "aten::flatten.using_ints",
      "aten::unflatten.int", "aten::transpose.int", "aten::permute",
      "aten::slice.Tensor", "aten::select.int",     "aten::narrow",
      "aten::unsqueeze",    "aten::squeeze",        "aten::squeeze.dim",
      "aten::squeeze.dims", "aten::expand",         "aten::contiguous",
      "aten::clone",        "aten::cat",            "aten::stack",
      "aten::chunk",        "aten::split.Tensor",   "aten::split_with_sizes",
      "aten::unbind.int",   "aten::neg",            "aten::select_scatter",
      "aten::slice_scatter"};
  return layout.contains(call.getOverload());
}

/// Whether no gradient flows through `call`. sgn of a complex value is
/// z / |z|, which has one, though the real sign is a step that has none.
bool isNonDifferentiable(aten::CallOp call) {
  if (!aten::hasFact(call.getOverload(), aten::OpFact::NonDifferentiable))
    return false;
  StringRef name = call.getOverload().split('.').first;
  return !((name == "aten::sgn" || name == "aten::sgn_") &&
           llvm::any_of(call.getOperands(), isComplexTensor));
}

/// An op that writes its first argument in place (`aten::relu_`): its first
/// result and the new value of that argument are one value. Returns the
/// index of the latter, or -1.
int64_t inPlaceSelfResult(aten::CallOp call) {
  StringRef base = call.getOverload().split('.').first;
  auto mutates = call.getMutates();
  if (!mutates || !base.ends_with("_") || call.getNumSchemaResults() == 0)
    return -1;
  for (auto [k, arg] : llvm::enumerate(*mutates))
    if (arg == 0)
      return call.getNumSchemaResults() + k;
  return -1;
}

/// The backward of `call` by libtorch's autograd (`aten.autograd_backward`),
/// for a call no gradient rule covers: the generator's state is copied just
/// before the call, and the backward computes the call again from its
/// inputs and back-propagates through it. Returns one gradient per operand
/// (null where none is needed).
FailureOr<SmallVector<Value>> autogradBackward(OpBuilder &builder,
                                               aten::CallOp call,
                                               ArrayRef<Value> resultGrads,
                                               ArrayRef<bool> needs) {
  if (!call.getOverload().starts_with("aten::"))
    return call.emitOpError()
           << describeCall(call)
           << " has no gradient rule, but it lies on the path from the "
              "parameters to the loss (libtorch's autograd differentiates "
              "only ATen operators, aten::)";
  unsigned numSchema = call.getNumSchemaResults();
  SmallVector<Value> grads;
  SmallVector<int64_t> gradResults;
  for (auto [r, g] : llvm::enumerate(resultGrads)) {
    if (!g)
      continue;
    if (r >= numSchema)
      return call.emitOpError()
             << describeCall(call)
             << " cannot be differentiated: a gradient reaches argument #"
             << (*call.getMutates())[r - numSchema]
             << ", which it writes in place, and only its results' "
                "gradients can be back-propagated through libtorch's "
                "autograd";
    grads.push_back(g);
    gradResults.push_back(r);
  }
  SmallVector<int64_t> wrt;
  SmallVector<Type> types;
  for (auto [index, need] : llvm::enumerate(needs))
    if (need) {
      wrt.push_back(index);
      types.push_back(call.getOperand(index).getType());
    }
  Value state;
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(call);
    state = aten::RngStateOp::create(
        builder, call.getLoc(),
        RankedTensorType::get({aten::kRngStateBytes},
                              builder.getIntegerType(8, /*isSigned=*/false)));
  }
  auto backward = aten::AutogradBackwardOp::create(
      builder, call.getLoc(), types, call.getOverloadAttr(), call.getArgs(),
      call.getOperands(), grads, state,
      builder.getDenseI64ArrayAttr(gradResults),
      builder.getDenseI64ArrayAttr(wrt), builder.getI64IntegerAttr(numSchema),
      call.getMutatesAttr(), call.getListResultAttr());
  SmallVector<Value> operandGrads(call.getNumOperands());
  for (auto [k, index] : llvm::enumerate(wrt))
    operandGrads[index] = backward.getResult(k);
  return operandGrads;
}

class Differentiator {
public:
  Differentiator(ModuleOp module, func::FuncOp func, aten::Target target)
      : module(module), func(func), body(func.getBody().front()),
        target(target) {
    for (auto param : module.getOps<ParamOp>())
      params.insert(param.getSymName());
  }

  LogicalResult run();

private:
  /// Values that depend on a parameter and that the loss depends on.
  void analyze();
  void markRequiresGrad();
  LogicalResult prepare();
  LogicalResult backward();
  void accumulate(aten::ATenBuilder &b, Value operand, Value grad);

  ModuleOp module;
  func::FuncOp func;
  Block &body;
  const aten::Target target;
  Value loss;
  llvm::StringSet<> params;
  llvm::DenseSet<Value> active;
  /// The values that require grad in eager training: computed from a
  /// parameter by differentiable ops.
  llvm::DenseSet<Value> varied;
  llvm::DenseMap<Value, Value> grads;
};

LogicalResult Differentiator::run() {
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() == 0 || !isFloatTensor(ret.getOperand(0)) ||
      cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0)
    return func.emitOpError("must return a scalar floating-point loss first "
                            "to be differentiated");
  loss = ret.getOperand(0);
  if (failed(prepare()))
    return failure();
  return backward();
}

void Differentiator::analyze() {
  varied.clear();
  for (Operation &op : body) {
    if (auto get = dyn_cast<GetOp>(op)) {
      if (params.contains(get.getName()) && isFloatTensor(get.getResult()))
        varied.insert(get.getResult());
      continue;
    }
    auto call = dyn_cast<aten::CallOp>(op);
    if (!call || isNonDifferentiable(call))
      continue;
    if (llvm::any_of(call.getOperands(),
                     [&](Value v) { return varied.contains(v); }))
      for (Value r : call.getResults())
        if (isFloatTensor(r))
          varied.insert(r);
  }
  active.clear();
  if (varied.contains(loss))
    active.insert(loss);
  for (Operation &op : llvm::reverse(body)) {
    auto call = dyn_cast<aten::CallOp>(op);
    if (!call || llvm::none_of(call.getResults(),
                               [&](Value r) { return active.contains(r); }))
      continue;
    for (Value operand : call.getOperands())
      if (varied.contains(operand))
        active.insert(operand);
  }
}

LogicalResult Differentiator::prepare() {
  analyze();
  SmallVector<std::pair<aten::CallOp, const aten::GradientRule *>> rewrite;
  for (auto call : body.getOps<aten::CallOp>()) {
    if (llvm::none_of(call.getResults(),
                      [&](Value r) { return active.contains(r); }))
      continue;
    const aten::GradientRule *rule = aten::lookupGradient(call.getOverload());
    if (rule && rule->prepare && ruleHoldsForComplex(call))
      rewrite.push_back({call, rule});
  }
  for (auto [call, rule] : rewrite) {
    OpBuilder builder(call);
    aten::ATenBuilder b(builder, call.getLoc());
    if (failed(rule->prepare(b, call, target)))
      return failure();
  }
  if (!rewrite.empty()) {
    // A rule's rewrite may replace the op that computed the loss.
    loss = cast<func::ReturnOp>(body.getTerminator()).getOperand(0);
    analyze();
  }
  markRequiresGrad();
  return success();
}

void Differentiator::markRequiresGrad() {
  // Eager training runs the forward with every parameter requiring grad,
  // and whatever it computes from them too; ops that read the flag say
  // which of their operands have it (aten.requires_grad).
  Builder builder(func.getContext());
  for (auto call : body.getOps<aten::CallOp>()) {
    if (!aten::hasFact(call.getOverload(), aten::OpFact::ReadsRequiresGrad))
      continue;
    SmallVector<int64_t> operands;
    for (auto [index, operand] : llvm::enumerate(call.getOperands()))
      if (varied.contains(operand))
        operands.push_back(index);
    if (!operands.empty())
      call->setAttr(aten::kRequiresGradAttr, builder.getDenseI64ArrayAttr(operands));
  }
}

void Differentiator::accumulate(aten::ATenBuilder &b, Value operand,
                                Value grad) {
  Value &slot = grads[operand];
  slot = slot ? b.add(slot, grad) : grad;
}

LogicalResult Differentiator::backward() {
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (!active.contains(loss))
    return func.emitOpError("returns a loss that depends on no parameter: "
                            "there is nothing to train");
  OpBuilder builder(ret);
  aten::ATenBuilder b(builder, ret.getLoc());
  // d loss / d loss = 1, as loss.backward() seeds it.
  grads[loss] = b.splat(cast<RankedTensorType>(loss.getType()), 1.0);
  // Where the backward starts: fsdp-shard gathers parameters again after it.
  if (Operation *seed = grads[loss].getDefiningOp())
    seed->setAttr(kBackwardStartAttr, builder.getUnitAttr());

  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    auto call = dyn_cast<aten::CallOp>(op);
    if (!call)
      continue;
    SmallVector<Value> resultGrads;
    for (Value r : call.getResults())
      resultGrads.push_back(active.contains(r) ? grads.lookup(r) : Value());
    if (int64_t self = inPlaceSelfResult(call); self >= 0 && resultGrads[self]) {
      // Both name the value the op wrote: their gradients add up.
      b.setLoc(call.getLoc());
      resultGrads[0] = resultGrads[0] ? b.add(resultGrads[0], resultGrads[self])
                                      : resultGrads[self];
      resultGrads[self] = Value();
    }
    if (llvm::none_of(resultGrads, [](Value g) { return bool(g); }))
      continue;
    SmallVector<bool> needs;
    for (Value operand : call.getOperands())
      needs.push_back(active.contains(operand));
    b.setLoc(call.getLoc());
    aten::GradientContext context(b, call, resultGrads, needs);
    const aten::GradientRule *rule = ruleHoldsForComplex(call)
                                         ? aten::lookupGradient(call.getOverload())
                                         : nullptr;
    if (rule && rule->backward && failed(rule->backward(context)))
      return failure();
    SmallVector<Value> operandGrads(context.operandGrads());
    if (!rule || !rule->backward || context.wantsAutograd()) {
      FailureOr<SmallVector<Value>> viaAutograd =
          autogradBackward(builder, call, resultGrads, needs);
      if (failed(viaAutograd))
        return failure();
      operandGrads = std::move(*viaAutograd);
    }
    for (auto [index, grad] : llvm::enumerate(operandGrads)) {
      if (!grad || !needs[index])
        continue;
      Value operand = call.getOperand(index);
      auto want = cast<RankedTensorType>(operand.getType());
      auto got = cast<RankedTensorType>(grad.getType());
      if (want.getShape() != got.getShape())
        return call.emitOpError("gradient rule produced ")
               << got << " for operand #" << index << " of type " << want
               << " (a bug in the rule)";
      // A real value's gradient is the real part of a complex one, as
      // autograd's engine takes it.
      if (isComplexTensor(grad) && !isa<ComplexType>(want.getElementType()))
        grad = b.call("aten::real", {grad},
                      RankedTensorType::get(
                          got.getShape(),
                          cast<ComplexType>(got.getElementType())
                              .getElementType()));
      accumulate(b, operand, b.cast(grad, want.getElementType()));
    }
  }

  // Each parameter's gradient is complete after its last contribution.
  for (auto get : body.getOps<GetOp>()) {
    Value grad = grads.lookup(get.getResult());
    if (!grad || !params.contains(get.getName()))
      continue;
    OpBuilder::InsertionGuard guard(builder);
    if (Operation *def = grad.getDefiningOp())
      builder.setInsertionPointAfter(def);
    GradOp::create(builder, get.getLoc(), get.getNameAttr(), grad);
  }
  return success();
}

struct Autodiff : fsdp::impl::AutodiffBase<Autodiff> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func) {
      module.emitError("no @train_step to differentiate (fsdp-append-loss "
                       "builds it)");
      return signalPassFailure();
    }
    if (device != "cpu" && device != "cuda") {
      module.emitError("unknown device '") << device << "': expected cpu or cuda";
      return signalPassFailure();
    }
    // The rules read it from the module (dropout), and so do the
    // optimizer and the plan.
    if (device == "cuda")
      module->setAttr(kDeviceAttr, StringAttr::get(&getContext(), device));
    aten::Target target;
    target.cuda = device == "cuda";
    if (failed(Differentiator(module, func, target).run()))
      signalPassFailure();
  }
};

} // namespace
