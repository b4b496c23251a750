//===- VerifyPlan.cpp - checks of a sharded step ---------------------------===//
//
// Every rank runs the same plan, so the plan itself must be right: the same
// collectives in the same order on every rank, every asynchronous result
// waited before it is read, every gathered buffer freed once and never read
// after. The op verifiers check each op alone; this pass checks the step.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace fsdp {
#define GEN_PASS_DEF_VERIFYPLAN
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct VerifyPlan : fsdp::impl::VerifyPlanBase<VerifyPlan> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable table(module);
    symbols = &table;
    bool ok = succeeded(checkGroups(module));
    module.walk([&](func::FuncOp func) {
      if (!func.getBody().empty() && failed(checkFunction(func)))
        ok = false;
    });
    if (!ok)
      signalPassFailure();
  }

  LogicalResult checkGroups(ModuleOp module);
  LogicalResult checkFunction(func::FuncOp func);
  /// Gathers a replicated flat parameter (held whole on every rank).
  bool isReplicated(AllGatherStartOp gather) {
    auto flat = symbols->lookup<FlatParamOp>(gather.getUnit());
    return flat && flat.getReplicated();
  }

  SymbolTable *symbols = nullptr; // the module's, built once
};

LogicalResult VerifyPlan::checkGroups(ModuleOp module) {
  auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr);
  auto group = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr);
  auto flats = module.getOps<FlatParamOp>();
  if (!world || !group) {
    if (!flats.empty())
      return (*flats.begin()).emitOpError(
          "is a flat parameter, but the module does not say its world and "
          "shard-group sizes (fsdp.world_size, fsdp.shard_group_size)");
    return success();
  }
  int64_t w = world.getInt(), g = group.getInt();
  if (w < 1 || g < 1 || w % g != 0)
    return module.emitError("shard-group size ")
           << g << " does not divide the world size " << w;
  for (FlatParamOp flat : flats)
    if (int64_t(flat.getShardGroupSize()) != g)
      return flat.emitOpError("has ")
             << flat.getShardGroupSize()
             << " shards, but every rank of a shard group of " << g
             << " holds one";
  return success();
}

LogicalResult VerifyPlan::checkFunction(func::FuncOp func) {
  Block &body = func.getBody().front();
  bool ok = true;
  auto fail = [&](Operation *op, const Twine &message) {
    op->emitOpError(message);
    ok = false;
  };

  // Same sequence on every rank: collectives only in straight-line code.
  func.walk([&](Operation *op) {
    if (isa<CollectiveStartOp, WaitOp, FreeOp>(op) &&
        op->getBlock() != &body)
      fail(op, "is inside a region: ranks could issue different collective "
               "sequences");
  });

  StepOrder order(body);
  auto at = [&](Operation *user) { return order.at(user); };

  // CPU offload: nothing read in the wrong memory. Collectives and the
  // device's copies read device tensors, `fsdp.to_host`'s input is on the
  // device, an ATen call does not mix host and device tensors, and state
  // is written from the memory it lives in.
  llvm::DenseSet<Value> host = hostValues(body);
  SymbolTableCollection symbols;
  for (Operation &op : body) {
    auto onHost = [&](Value v) { return host.contains(v); };
    if (auto start = dyn_cast<CollectiveStartOp>(&op)) {
      if (onHost(start.getCollectiveInput()))
        fail(&op, "sends a host tensor: a collective runs on the device "
                  "(copy it with fsdp.to_device)");
    } else if (isa<ToDeviceOp>(op) && !onHost(op.getOperand(0))) {
      fail(&op, "copies a device tensor to the device");
    } else if (isa<ToHostOp>(op) && onHost(op.getOperand(0))) {
      fail(&op, "copies a host tensor to the host");
    } else if (auto update = dyn_cast<UpdateOp>(op)) {
      bool hostState = isHostState(update, update.getNameAttr(), &symbols);
      if (hostState != onHost(update.getValue()))
        fail(&op, Twine("writes @") + update.getName() + ", which lives on the " +
                      (hostState ? "host" : "device") + ", from the " +
                      (hostState ? "device" : "host"));
    } else if (isa<aten::CallOp, aten::AutogradBackwardOp>(op) &&
               llvm::any_of(op.getOperands(), onHost)) {
      for (Value operand : op.getOperands())
        if (!onHost(operand) && !operand.getDefiningOp<aten::ConstantOp>()) {
          fail(&op, "reads host and device tensors together (copy one with "
                    "fsdp.to_host or fsdp.to_device)");
          break;
        }
    }
  }

  // NCCL adds and averages floating-point numbers (complex ones as pairs
  // of reals) and adds bytes and 32- and 64-bit integers (bool's sum as a
  // maximum): a plan for it reduces nothing else.
  auto backend = func->getParentOfType<ModuleOp>()->getAttrOfType<StringAttr>(
      kBackendAttr);
  if (backend && backend.getValue() == "nccl")
    for (Operation &op : body) {
      ReduceOp reduce;
      if (auto scatter = dyn_cast<ReduceScatterStartOp>(op))
        reduce = scatter.getReduce();
      else if (auto all = dyn_cast<AllReduceStartOp>(op))
        reduce = all.getReduce();
      else
        continue;
      Type element = cast<RankedTensorType>(op.getOperand(0).getType())
                         .getElementType();
      if (auto complex = dyn_cast<ComplexType>(element))
        element = complex.getElementType();
      auto integer = dyn_cast<IntegerType>(element);
      unsigned width = integer ? integer.getWidth() : 0;
      bool floating =
          isa<Float32Type, Float64Type, Float16Type, BFloat16Type>(element);
      bool adds = floating || width == 1 || width == 8 || width == 32 ||
                  width == 64;
      std::string name;
      llvm::raw_string_ostream(name) << element;
      if (!adds || (!floating && reduce == ReduceOp::mean))
        fail(&op, Twine("reduces tensors of ") + name +
                      " by " + (reduce == ReduceOp::mean ? "mean" : "sum") +
                      ", which NCCL cannot (fsdp.backend = \"nccl\")");
    }

  for (Operation &op : body) {
    if (auto collective = dyn_cast<CollectiveStartOp>(op)) {
      Value future = collective.getCollectiveFuture();
      if (future.use_empty()) {
        fail(&op, "starts a collective that is never waited");
        continue;
      }
      // Nothing may write the input while the collective reads it.
      int64_t waitAt = at(*future.getUsers().begin());
      Value input = collective.getCollectiveInput();
      for (OpOperand &use : input.getUses()) {
        Operation *user = use.getOwner();
        auto call = dyn_cast<aten::CallOp>(user);
        if (!call || at(user) <= at(&op) || at(user) > waitAt)
          continue;
        aten::CallArgs args(call);
        if (auto mutates = call.getMutates())
          for (int64_t arg : *mutates)
            if (args.operandIndex(arg) == int64_t(use.getOperandNumber()))
              fail(user, "writes the input of a collective before its wait");
      }
      if (auto gather = dyn_cast<AllGatherStartOp>(&op)) {
        if (isReplicated(gather)) {
          // Every rank holds the whole: what is gathered are the updated
          // shards, and the whole becomes the flat parameter's new value.
          auto wait = cast<WaitOp>(*future.getUsers().begin());
          auto update = wait.getResult().hasOneUse()
                            ? dyn_cast<UpdateOp>(
                                  *wait.getResult().getUsers().begin())
                            : UpdateOp();
          if (!update || update.getName() != gather.getUnit())
            fail(&op, Twine("gathers the replicated flat parameter @") +
                          gather.getUnit() +
                          " into something other than its update (every "
                          "rank holds it whole)");
        } else {
          // CPU offload: the shard read on the host, copied to the device.
          Value shard = gather.getShard();
          if (auto copy = shard.getDefiningOp<ToDeviceOp>())
            shard = copy.getInput();
          auto read = shard.getDefiningOp<GetOp>();
          if (!read || read.getName() != gather.getUnit())
            fail(&op, Twine("gathers a tensor that is not the shard of ") +
                          "@" + gather.getUnit() + " (an fsdp.get of it)");
        }
      }
    }

    auto wait = dyn_cast<WaitOp>(op);
    auto gathered =
        wait ? wait.getFuture().getDefiningOp<AllGatherStartOp>() : nullptr;
    // A replicated flat parameter's gather is its update, checked above.
    if (!gathered || isReplicated(gathered))
      continue;
    // A gathered buffer: freed exactly once, nothing reads it or a view of
    // it afterwards.
    Value buffer = wait.getResult();
    SmallVector<FreeOp> frees;
    for (Operation *user : buffer.getUsers())
      if (auto free = dyn_cast<FreeOp>(user))
        frees.push_back(free);
    if (frees.empty()) {
      fail(wait, "gathers a buffer that is never freed");
      continue;
    }
    if (frees.size() > 1) {
      llvm::sort(frees, [&](FreeOp a, FreeOp b) { return at(a) < at(b); });
      fail(frees[1], "frees a gathered buffer a second time");
      continue;
    }
    // What shares its storage: its views, and ATen views of them (a
    // transposed weight).
    int64_t freedAt = at(frees.front());
    for (Value alias : viewClosure(buffer))
      for (Operation *user : alias.getUsers())
        if (!isa<FreeOp>(user) && at(user) > freedAt) {
          InFlightDiagnostic diag =
              user->emitOpError("uses a gathered buffer after its free");
          diag.attachNote(frees.front().getLoc()) << "freed here";
          ok = false;
        }
  }
  return success(ok);
}

} // namespace
