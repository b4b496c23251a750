//===- ActivationCheckpointing.cpp - recompute regions in the backward -----===//
//
// torch.utils.checkpoint on a module, decided before the step runs: the
// forward of a checkpointed region keeps only what leaves it, and the
// backward computes the region again right before it first needs one of
// its other values. The region's random draws are replayed from the
// generator's state of its forward.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace fsdp {
#define GEN_PASS_DEF_ACTIVATIONCHECKPOINTING
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct ActivationCheckpointing
    : fsdp::impl::ActivationCheckpointingBase<ActivationCheckpointing> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module);
  /// The regions the options name, outermost only, in preorder.
  FailureOr<SmallVector<std::string>> regions(ModuleOp module);
  /// Checkpoints one region of `body`, whose backward starts at `seed`;
  /// `calls` are the region's calls in the forward, in order.
  void checkpoint(Block &body, Operation *seed, StringRef region,
                  ArrayRef<Operation *> calls);
};

FailureOr<SmallVector<std::string>>
ActivationCheckpointing::regions(ModuleOp module) {
  // The module tree: (path, class) in preorder.
  SmallVector<std::pair<std::string, std::string>> tree = moduleTree(module);
  llvm::StringSet<> chosen;
  if (allUnits) {
    bool anyUnit = false;
    for (auto param : module.getOps<ParamOp>())
      if (auto unit = param->getAttrOfType<StringAttr>(kUnitAttr)) {
        anyUnit = true;
        if (!unit.getValue().empty())
          chosen.insert(unit.getValue());
      }
    if (!anyUnit)
      return module.emitError(
          "activation checkpointing of every FSDP unit needs the units: "
          "run fsdp-auto-wrap first (or name the regions with --ac-class "
          "or --ac-module)");
    if (chosen.empty())
      return module.emitError(
          "activation checkpointing checkpoints every FSDP unit but the "
          "root, and the root is the only unit: wrap units with --auto-wrap "
          "(or name the regions with --ac-class or --ac-module)");
  }
  for (const std::string &cls : classes) {
    bool found = false;
    for (auto &[path, c] : tree)
      if (moduleClassMatches(c, cls)) {
        chosen.insert(path);
        found = true;
      }
    if (!found)
      return module.emitError("--ac-class ")
             << cls << ": no module of the model has this class";
  }
  for (const std::string &path : modules) {
    if (llvm::none_of(tree, [&](auto &m) { return m.first == path; }))
      return module.emitError("--ac-module ")
             << (path.empty() ? "''" : path)
             << ": the model has no module at this path";
    chosen.insert(path);
  }
  // Outermost only: a region inside another is recomputed with it.
  SmallVector<std::string> out;
  for (auto &[path, cls] : tree) {
    if (!chosen.contains(path))
      continue;
    if (llvm::any_of(out, [&](const std::string &outer) {
          return isWithinModule(path, outer);
        }))
      continue;
    out.push_back(path);
  }
  return out;
}

void ActivationCheckpointing::checkpoint(Block &body, Operation *seed,
                                         StringRef region,
                                         ArrayRef<Operation *> calls) {
  // The block keeps its ops' order (isBeforeInBlock), so earlier regions'
  // recomputations cost nothing here.
  auto inBackward = [&](Operation *op) {
    return op->getBlock() == &body && !op->isBeforeInBlock(seed);
  };
  if (calls.empty())
    return;
  llvm::DenseSet<Operation *> inRegion(calls.begin(), calls.end());
  // What it keeps: values read after it by the forward outside it (its
  // outputs). Values of the region the backward reads are recomputed.
  // The region's other values, recomputed where the backward reads them.
  SmallVector<Value> internal;
  for (Operation *op : calls)
    for (Value result : op->getResults())
      if (llvm::none_of(result.getUsers(), [&](Operation *user) {
            return !inRegion.contains(user) &&
                   (!inBackward(user) || isa<func::ReturnOp>(user));
          }))
        internal.push_back(result);
  Operation *firstUse = nullptr;
  llvm::DenseSet<Operation *> needed;
  SmallVector<Operation *> work;
  auto need = [&](Operation *op) {
    if (op && inRegion.contains(op) && needed.insert(op).second)
      work.push_back(op);
  };
  for (Value result : internal) {
    for (Operation *user : result.getUsers())
      if (inBackward(user)) {
        need(result.getDefiningOp());
        if (!firstUse || user->isBeforeInBlock(firstUse))
          firstUse = user;
      }
  }
  if (!firstUse)
    return; // the backward reads nothing the region alone keeps

  // What the recomputation runs: the calls the backward's reads depend on
  // (the region's outputs are kept from the forward, not made again; PyTorch
  // stops its recomputation early the same way), and, so that each random
  // draw is the forward's, every call that draws before the last one run.
  // An output of the region the backward reads anyway is read as the
  // forward kept it.
  llvm::DenseSet<Value> recomputed(internal.begin(), internal.end());
  auto keptForBackward = [&](Value v) {
    return !recomputed.contains(v) &&
           llvm::any_of(v.getUsers(), inBackward);
  };
  // An in-place call (`bernoulli_` on the dropout decomposition's noise)
  // writing a value the recomputation makes is needed with it.
  auto writesNeeded = [&](Operation *op) {
    if (aten::functionalForm(cast<aten::CallOp>(op).getOverload()).empty() ||
        op->getNumOperands() == 0)
      return false;
    Operation *def = op->getOperand(0).getDefiningOp();
    return def && needed.contains(def);
  };
  auto closeOver = [&] {
    bool grew = true;
    while (grew) {
      while (!work.empty())
        for (Value operand : work.pop_back_val()->getOperands())
          if (!keptForBackward(operand))
            need(operand.getDefiningOp());
      grew = false;
      for (Operation *op : calls)
        if (!needed.contains(op) && writesNeeded(op)) {
          need(op);
          grew = true;
        }
    }
  };
  closeOver();
  auto draws = [](Operation *op) {
    return aten::hasFact(cast<aten::CallOp>(op).getOverload(),
                         aten::OpFact::Random);
  };
  Operation *lastDraw = nullptr;
  for (Operation *op : calls)
    if (needed.contains(op) && draws(op))
      lastDraw = op;
  for (Operation *op : calls) {
    if (op == lastDraw)
      break;
    if (lastDraw && draws(op))
      need(op);
  }
  closeOver();

  MLIRContext *ctx = body.getParentOp()->getContext();
  OpBuilder builder(calls.front());
  Location loc = calls.front()->getLoc();
  aten::RngStateOp saved, current;
  auto stateType = RankedTensorType::get(
      {aten::kRngStateBytes}, IntegerType::get(ctx, 8, IntegerType::Unsigned));
  if (lastDraw) {
    saved = aten::RngStateOp::create(builder, loc, stateType);
    saved->setAttr(kCheckpointAttr, builder.getStringAttr(region));
  }

  builder.setInsertionPoint(firstUse);
  if (lastDraw) {
    current = aten::RngStateOp::create(builder, loc, stateType);
    aten::SetRngStateOp::create(builder, loc, saved.getState());
  }
  IRMapping mapping;
  for (Operation *op : calls) {
    if (!needed.contains(op))
      continue;
    Operation *copy = builder.clone(*op, mapping);
    copy->setAttr(kRecomputeAttr, builder.getStringAttr(region));
  }
  if (lastDraw)
    aten::SetRngStateOp::create(builder, loc, current.getState());

  // The backward reads the recomputed values.
  for (Value result : internal)
    if (mapping.contains(result))
      result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
        return inBackward(use.getOwner());
      });
}

LogicalResult ActivationCheckpointing::run(ModuleOp module) {
  if (!allUnits && classes.empty() && modules.empty())
    return success();
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    return module.emitError("no @train_step to checkpoint (fsdp-append-loss "
                            "and fsdp-autodiff build it)");
  Block &body = func.getBody().front();
  Operation *seed = nullptr;
  for (Operation &op : body)
    if (op.hasAttr(kBackwardStartAttr))
      seed = &op;
  if (!seed)
    return func.emitOpError("has no backward (no op marked ")
           << kBackwardStartAttr << "): run fsdp-autodiff first";
  FailureOr<SmallVector<std::string>> chosen = regions(module);
  if (failed(chosen))
    return failure();
  // Each forward call's region, in one walk of the forward (the regions
  // are disjoint: outermost only): the innermost of its module path's
  // prefixes that is a region.
  llvm::StringMap<size_t> index;
  for (auto [i, region] : llvm::enumerate(*chosen))
    index[region] = i;
  SmallVector<SmallVector<Operation *>> calls(chosen->size());
  for (Operation &op : body) {
    if (&op == seed)
      break;
    if (!isa<aten::CallOp>(op))
      continue;
    std::optional<std::string> path = modulePathOf(&op);
    if (!path)
      continue;
    StringRef prefix = *path;
    while (true) {
      auto it = index.find(prefix);
      if (it != index.end()) {
        calls[it->second].push_back(&op);
        break;
      }
      if (prefix.empty())
        break;
      size_t dot = prefix.rfind('.');
      prefix = dot == StringRef::npos ? StringRef() : prefix.take_front(dot);
    }
  }
  for (auto [i, region] : llvm::enumerate(*chosen))
    checkpoint(body, seed, region, calls[i]);
  return success();
}

} // namespace
