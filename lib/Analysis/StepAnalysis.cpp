//===- StepAnalysis.cpp - order, phase and aliasing in a step
//--------------===//

#include "fsdp/Analysis/StepAnalysis.h"

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Transforms/Passes.h"

using namespace mlir;
using namespace fsdp;

StepOrder::StepOrder(Block &body) : body(body) { recompute(); }

void StepOrder::recompute() {
  position.clear();
  boundaries.clear();
  microBatchStarts.clear();
  backward = nullptr;
  for (Operation &op : body) {
    int64_t at = position.size();
    position[&op] = at;
    if (op.hasAttr(kBackwardStartAttr)) {
      if (!backward)
        backward = &op;
      boundaries.emplace_back(at, Phase::Backward);
    } else if (op.hasAttr(kMicroBatchStartAttr)) {
      boundaries.emplace_back(at, Phase::Forward);
      microBatchStarts.push_back(at);
    }
  }
}

int64_t StepOrder::microBatch(Operation *op) const {
  return llvm::upper_bound(microBatchStarts, at(op)) - microBatchStarts.begin();
}

Phase StepOrder::phase(Operation *op) const {
  if (Operation *top = op ? body.findAncestorOpInBlock(*op) : nullptr;
      top && top->hasAttr(kOptimizerOpAttr))
    return Phase::Optimizer;
  int64_t pos = at(op);
  // The last boundary at or before `op`.
  auto it = llvm::upper_bound(
      boundaries, pos, [](int64_t p, const std::pair<int64_t, Phase> &b) {
        return p < b.first;
      });
  return it == boundaries.begin() ? Phase::Forward : std::prev(it)->second;
}

int64_t StepOrder::at(Operation *op) const {
  Operation *top = op ? body.findAncestorOpInBlock(*op) : nullptr;
  if (!top)
    return -1;
  auto it = position.find(top);
  return it == position.end() ? -1 : it->second;
}

bool fsdp::isViewOf(Operation *user, Value operand) {
  if (auto view = dyn_cast<ViewOp>(user))
    return view.getBuffer() == operand;
  auto call = dyn_cast<aten::CallOp>(user);
  return call && !call.getMutates() &&
         aten::hasFact(call.getOverload(), aten::OpFact::View) &&
         call.getNumOperands() >= 1 && call.getOperand(0) == operand;
}

SmallVector<int64_t> fsdp::argumentOperands(aten::CallOp call) {
  SmallVector<int64_t> first;
  int64_t next = 0;
  for (Attribute arg : call.getArgs()) {
    first.push_back(next);
    next += aten::numOperandsOf(arg);
  }
  return first;
}

bool fsdp::returnsWrittenArguments(aten::CallOp call) {
  return call.getOpName().ends_with("_") ||
         call.getOverload().ends_with(".out");
}

llvm::SetVector<Value> fsdp::viewClosure(ArrayRef<Value> roots) {
  llvm::SetVector<Value> aliases;
  aliases.insert_range(roots);
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (isViewOf(user, aliases[i]))
        aliases.insert_range(user->getResults());
  return aliases;
}

WaitOp fsdp::waitOf(CollectiveStartOp start) {
  Value future = start.getCollectiveFuture();
  return future.hasOneUse() ? dyn_cast<WaitOp>(*future.getUsers().begin())
                            : WaitOp();
}

SmallVector<Gather> fsdp::collectGathers(const StepOrder &order) {
  SmallVector<Gather> gathers;
  for (auto start : order.getBody().getOps<AllGatherStartOp>()) {
    // CPU offload: the shard read on the host, copied to the device.
    auto copy = start.getShard().getDefiningOp<ToDeviceOp>();
    auto read = (copy ? copy.getInput() : start.getShard()).getDefiningOp<GetOp>();
    WaitOp wait = waitOf(start);
    if (!read || !wait || llvm::any_of(wait->getUsers(), [](Operation *user) {
          return isa<UpdateOp>(user);
        }))
      continue;
    FreeOp free;
    for (Operation *user : wait->getUsers())
      if (auto f = dyn_cast<FreeOp>(user))
        free = f;
    gathers.push_back({read, copy, start, wait, free, order.phase(start)});
  }
  return gathers;
}

bool fsdp::isHostState(Operation *op, FlatSymbolRefAttr name,
                       SymbolTableCollection *symbols) {
  Operation *symbol = symbols ? symbols->lookupNearestSymbolFrom(op, name)
                              : SymbolTable::lookupNearestSymbolFrom(op, name);
  return symbol && symbol->hasAttr(kHostAttr);
}

llvm::DenseSet<Value> fsdp::hostValues(Block &body) {
  llvm::DenseSet<Value> host;
  SmallVector<aten::ConstantOp> constants;
  SymbolTableCollection symbols;
  for (Operation &op : body) {
    if (auto get = dyn_cast<GetOp>(op)) {
      if (isHostState(get, get.getNameAttr(), &symbols))
        host.insert(get.getResult());
    } else if (isa<ToHostOp>(op)) {
      host.insert(op.getResult(0));
    } else if (auto constant = dyn_cast<aten::ConstantOp>(op)) {
      constants.push_back(constant);
    } else if (isa<aten::CallOp, aten::AutogradBackwardOp>(op) &&
               llvm::any_of(op.getOperands(),
                            [&](Value v) { return host.contains(v); })) {
      host.insert_range(op.getResults());
    }
  }
  // A constant lives where the ops that read it run.
  for (aten::ConstantOp constant : constants) {
    Value v = constant.getResult();
    if (!v.use_empty() && llvm::all_of(v.getUsers(), [&](Operation *user) {
          return llvm::any_of(user->getResults(),
                              [&](Value r) { return host.contains(r); });
        }))
      host.insert(v);
  }
  return host;
}

int64_t fsdp::commGroupSize(CommGroup group, int64_t worldSize,
                            int64_t shardGroupSize) {
  switch (group) {
  case CommGroup::world:
    return worldSize;
  case CommGroup::shard:
    return shardGroupSize;
  case CommGroup::replicate:
    return worldSize / shardGroupSize;
  }
  return 1;
}
