//===- GradAccum.cpp - K micro-batches before each update
//------------------===//
//
// fsdp-grad-accum: the step's forward and backward, run once per
// micro-batch on its own inputs, gradients summed in micro-batch order and
// handed to the optimizer once. Runs between fsdp-autodiff (fsdp-shard in
// the sharded pipeline) and fsdp-optimizer, so what is repeated is exactly
// what one micro-batch does: its gathers, its compute, its reductions.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

namespace fsdp {
#define GEN_PASS_DEF_GRADACCUM
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct GradAccum : fsdp::impl::GradAccumBase<GradAccum> {
  using GradAccumBase::GradAccumBase;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

  LogicalResult run() {
    ModuleOp module = getOperation();
    if (microBatches < 1)
      return module.emitError("invalid micro-batches: ")
             << microBatches.getValue()
             << " (the micro-batches of one optimizer step, at least 1)";
    if (microBatches == 1)
      return success();
    const int64_t k = microBatches;
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func)
      return module.emitError("no @train_step to accumulate (fsdp-append-loss "
                              "and fsdp-autodiff build it)");
    if (!func.getBody().hasOneBlock())
      return func.emitOpError("must be a single block to accumulate");
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1)
      return func.emitOpError("returns ")
             << ret.getNumOperands()
             << " values: gradient accumulation runs before fsdp-optimizer, "
                "on a step that returns its loss alone";
    if (llvm::any_of(func.getArguments(), [&](BlockArgument arg) {
          return func.getArgAttr(arg.getArgNumber(), kMicroBatchAttr);
        }))
      return func.emitOpError("already accumulates micro-batches");

    // The backward's seed: d(loss / K) / d loss = 1 / K.
    Operation *seed = nullptr;
    for (Operation &op : body)
      if (op.hasAttr(kBackwardStartAttr)) {
        seed = &op;
        break;
      }
    auto seedConst = dyn_cast_or_null<aten::ConstantOp>(seed);
    auto seedType =
        seedConst ? dyn_cast<RankedTensorType>(seedConst.getType()) : nullptr;
    if (!seedType || seedType.getRank() != 0 ||
        !isa<FloatType>(seedType.getElementType()))
      return func.emitOpError("has no backward seed (a scalar constant marked ")
             << kBackwardStartAttr << "): run fsdp-autodiff first";
    {
      OpBuilder builder(seedConst);
      aten::ATenBuilder b(builder, seedConst.getLoc());
      Value scaled = b.splat(seedType, 1.0 / static_cast<double>(k));
      scaled.getDefiningOp()->setAttr(kBackwardStartAttr,
                                      builder.getUnitAttr());
      seedConst.getResult().replaceAllUsesWith(scaled);
      seedConst.erase();
    }

    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    unsigned numInputs = func.getNumArguments();
    for (unsigned i = 0; i < numInputs; ++i)
      func.setArgAttr(i, kMicroBatchAttr,
                      IntegerAttr::get(IntegerType::get(&getContext(), 64), 0));

    // What the last micro-batch so far left: each parameter's accumulated
    // gradient (its fsdp.grad), each written buffer's value (its update).
    llvm::MapVector<Attribute, GradOp> grads;
    llvm::MapVector<Attribute, UpdateOp> updates;
    for (Operation *op : ops) {
      if (auto grad = dyn_cast<GradOp>(op))
        if (!grads.try_emplace(grad.getParamAttr().getAttr(), grad).second)
          return grad.emitOpError("is the second gradient of ")
                 << grad.getParamAttr();
      if (auto update = dyn_cast<UpdateOp>(op))
        if (!updates.try_emplace(update.getNameAttr().getAttr(), update).second)
          return update.emitOpError("is the second update of ")
                 << update.getNameAttr() << " in one micro-batch";
    }
    for (Operation *op : ops)
      if (auto get = dyn_cast<GetOp>(op)) {
        auto it = updates.find(get.getNameAttr().getAttr());
        if (it != updates.end() && it->second->isBeforeInBlock(get))
          return get.emitOpError("reads @")
                 << get.getName()
                 << " after the step updates it: a micro-batch could not "
                    "start from what the previous one left";
      }

    OpBuilder builder(ret);
    // The micro-batches' losses are summed in f32 when the step computes
    // in a 16-bit type (mixed precision), as a loop adding `loss.item()`s
    // would: the mean is a report, not something to round to bf16.
    auto widened = [&](Value loss) {
      Type elem = cast<ShapedType>(loss.getType()).getElementType();
      if (!elem.isBF16() && !elem.isF16())
        return loss;
      aten::ATenBuilder b(builder, ret.getLoc());
      return b.cast(loss, Float32Type::get(loss.getContext()));
    };
    Value lossSum = widened(ret.getOperand(0));
    // Superseded gradients and updates, erased once every copy is made
    // (the first micro-batch's are the originals being copied).
    SmallVector<Operation *> superseded;
    for (int64_t m = 1; m < k; ++m) {
      IRMapping map;
      for (unsigned i = 0; i < numInputs; ++i) {
        BlockArgument arg = func.getArgument(i);
        NamedAttrList attrs(func.getArgAttrDict(i));
        attrs.set(kMicroBatchAttr,
                  IntegerAttr::get(IntegerType::get(&getContext(), 64), m));
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(index, arg.getType(),
                                       attrs.getDictionary(&getContext()),
                                       arg.getLoc())))
          return failure();
        map.map(arg, func.getArgument(index));
      }
      // This micro-batch reads what the previous one wrote.
      for (Operation *op : ops)
        if (auto get = dyn_cast<GetOp>(op)) {
          auto it = updates.find(get.getNameAttr().getAttr());
          if (it != updates.end())
            map.map(get.getResult(), it->second.getValue());
        }
      bool first = true;
      for (Operation *op : ops) {
        if (auto get = dyn_cast<GetOp>(op);
            get && map.contains(get.getResult()))
          continue;
        Operation *copy = builder.clone(*op, map);
        if (first) {
          copy->setAttr(kMicroBatchStartAttr, builder.getUnitAttr());
          first = false;
        }
        if (auto grad = dyn_cast<GradOp>(copy)) {
          GradOp &last = grads[grad.getParamAttr().getAttr()];
          builder.setInsertionPoint(grad);
          aten::ATenBuilder b(builder, grad.getLoc());
          Value sum = b.add(last.getValue(), grad.getValue());
          grad.getValueMutable().assign(sum);
          superseded.push_back(last);
          last = grad;
          builder.setInsertionPoint(ret);
        } else if (auto update = dyn_cast<UpdateOp>(copy)) {
          UpdateOp &last = updates[update.getNameAttr().getAttr()];
          superseded.push_back(last);
          last = update;
        }
      }
      aten::ATenBuilder b(builder, ret.getLoc());
      lossSum = b.add(lossSum, widened(map.lookup(ret.getOperand(0))));
    }
    for (Operation *op : superseded)
      op->erase();
    aten::ATenBuilder b(builder, ret.getLoc());
    ret.getOperandsMutable().assign(
        b.divScalar(lossSum, static_cast<double>(k)));
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }
};

} // namespace
